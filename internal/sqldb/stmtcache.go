package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"

	"modernc.org/sqlite"
)

// maxCachedStmts bounds the statements one SQLite connection keeps
// compiled. The stores use about a hundred distinct statements; a
// connection that meets more (statements built with a varying number of
// parameters, say) forgets them all and starts again.
const maxCachedStmts = 256

// stmtCacheConnector opens SQLite connections that keep the statements
// they run compiled, keyed by their text.
//
// Written here because nothing else does it for every caller: the
// modernc.org/sqlite driver compiles the SQL of every Conn.ExecContext and
// Conn.QueryContext again (it keeps a statement only behind a driver.Stmt),
// and database/sql reuses a compiled statement only for a *sql.Stmt the
// caller prepared and kept. Compiling was 12 % of the CPU of an agent's
// write step and of a durable message/send; with the cache a statement is
// compiled once per connection and then only bound, stepped and reset.
//
// Only single statements are cached (SQL without a ';' inside): a script
// (a migration) runs as before. A statement whose rows are still open is
// not reused: a second use while they are runs uncached.
type stmtCacheConnector struct {
	dsn string
	drv *sqlite.Driver
	// sent, when not nil, counts the statements the connections run.
	sent *atomic.Int64
}

var _ driver.Connector = stmtCacheConnector{}

// OpenSQLite returns a database handle for the modernc.org/sqlite data
// source dsn (sql.Open("sqlite", dsn) would name the same database)
// whose connections keep the statements they run compiled.
func OpenSQLite(dsn string) *sql.DB {
	return openSQLiteCounting(dsn, nil)
}

// openSQLiteCounting is OpenSQLite counting in sent (when not nil) every
// statement its connections run: each Exec and Query, of the cache or of
// a statement prepared and kept, and each BEGIN, COMMIT and ROLLBACK.
func openSQLiteCounting(dsn string, sent *atomic.Int64) *sql.DB {
	return sql.OpenDB(stmtCacheConnector{dsn: dsn, drv: &sqlite.Driver{}, sent: sent})
}

func (c stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("sqldb: the SQLite driver's connection lacks the context methods")
	}
	return &cachingConn{sqliteConn: inner, stmts: make(map[string]*cachedStmt), sent: c.sent}, nil
}

func (c stmtCacheConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is what database/sql uses of a modernc.org/sqlite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a SQLite connection with its compiled statements. Like
// every driver.Conn it is used by one goroutine at a time.
type cachingConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
	// compiled counts the statements compiled for the cache.
	compiled int
	// sent, when not nil, counts the statements run (the DB's).
	sent *atomic.Int64
}

// count adds one statement run to c.sent.
func (c *cachingConn) count() {
	if c.sent != nil {
		c.sent.Add(1)
	}
}

// cachedStmt is a compiled statement; busy while rows it returned are
// open, dropped once forgotten while busy (the rows close it).
type cachedStmt struct {
	stmt          compiledStmt
	busy, dropped bool
}

// compiledStmt is what modernc.org/sqlite's prepared statements provide.
type compiledStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

var (
	_ driver.ExecerContext  = (*cachingConn)(nil)
	_ driver.QueryerContext = (*cachingConn)(nil)
)

// get returns the compiled statement of query, compiling it at first use;
// nil when query is not cached (a script) or its statement is busy.
func (c *cachingConn) get(ctx context.Context, query string) (*cachedStmt, error) {
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil, nil
		}
		return s, nil
	}
	if strings.Contains(strings.TrimRight(query, "; \t\n"), ";") {
		return nil, nil // a script: never in the cache
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(compiledStmt)
	if !ok {
		ds.Close()
		return nil, nil
	}
	if len(c.stmts) >= maxCachedStmts {
		c.forget()
	}
	s := &cachedStmt{stmt: st}
	c.stmts[query] = s
	c.compiled++
	return s, nil
}

// forget closes every cached statement that is not in use, and drops all.
func (c *cachingConn) forget() {
	for q, s := range c.stmts {
		if s.busy {
			s.dropped = true
		} else {
			s.stmt.Close()
		}
		delete(c.stmts, q)
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.count()
	s, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return s.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.count()
	s, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	if typed, ok := rows.(sqliteRows); ok {
		return &cachedRows{sqliteRows: typed, s: s}, nil
	}
	return &plainCachedRows{Rows: rows, s: s}, nil
}

// BeginTx begins a transaction, counting its BEGIN and its end.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.sent == nil {
		return c.sqliteConn.BeginTx(ctx, opts)
	}
	c.count()
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countedTx{tx, c}, nil
}

// countedTx counts its COMMIT or ROLLBACK.
type countedTx struct {
	driver.Tx
	c *cachingConn
}

func (t countedTx) Commit() error   { t.c.count(); return t.Tx.Commit() }
func (t countedTx) Rollback() error { t.c.count(); return t.Tx.Rollback() }

// PrepareContext prepares a statement that a caller keeps (a *sql.Stmt),
// counting each of its runs.
func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil || c.sent == nil {
		return ds, err
	}
	st, ok := ds.(compiledStmt)
	if !ok {
		return ds, nil
	}
	return countedStmt{st, c}, nil
}

// countedStmt is a kept statement whose runs are counted.
type countedStmt struct {
	compiledStmt
	c *cachingConn
}

func (s countedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.count()
	return s.compiledStmt.ExecContext(ctx, args)
}

func (s countedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.count()
	return s.compiledStmt.QueryContext(ctx, args)
}

// Close closes the cached statements, then the connection.
func (c *cachingConn) Close() error {
	c.forget()
	return c.sqliteConn.Close()
}

// cachedRows frees its statement for the next use when closed. It keeps
// the column types of modernc's rows, which embedding driver.Rows alone
// would hide from sql.Rows.ColumnTypes.
type cachedRows struct {
	sqliteRows
	s *cachedStmt
}

// sqliteRows is what modernc.org/sqlite's rows provide.
type sqliteRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

func (r *cachedRows) Close() error {
	err := r.sqliteRows.Close()
	r.s = r.s.release()
	return err
}

// plainCachedRows is cachedRows for rows without column types (not
// modernc's: for a driver that would not give them).
type plainCachedRows struct {
	driver.Rows
	s *cachedStmt
}

func (r *plainCachedRows) Close() error {
	err := r.Rows.Close()
	r.s = r.s.release()
	return err
}

// release frees s (nil: nothing) for its next use once its rows are
// closed, or closes it if the cache dropped it meanwhile; it returns nil.
func (s *cachedStmt) release() *cachedStmt {
	if s != nil {
		s.busy = false
		if s.dropped {
			s.stmt.Close()
		}
	}
	return nil
}
