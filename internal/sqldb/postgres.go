package sqldb

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres returns a database/sql pool of pgx connections to the server
// of cfg. PostgreSQL is reached through database/sql, like SQLite, so that
// the SQL is written once; pgx's stdlib adapter does the protocol, the
// types and each connection's statement cache. (pgxpool would split every
// caller into a database/sql half and a pgx half.)
func OpenPostgres(cfg *pgx.ConnConfig) *sql.DB {
	return stdlib.OpenDB(*cfg)
}

// sentCounter is a pgx tracer counting the queries and prepares a
// connection sends (DB.Statements).
type sentCounter atomic.Int64

func (c *sentCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	(*atomic.Int64)(c).Add(1)
	return ctx
}

func (*sentCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *sentCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	(*atomic.Int64)(c).Add(1)
	return ctx
}

func (*sentCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
