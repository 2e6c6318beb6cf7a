package proposals

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// Claimer keeps two processes on one database from working on one thing
// at once. Claim returns ok false, at once, when another process holds
// name; when ok, the claim lasts until release is called or the process
// ends (it then lapses by itself: a crashed claimant never blocks the
// others).
type Claimer interface {
	Claim(ctx context.Context, name string) (release func(), ok bool, err error)
}

// DBClaims returns the Claimer of the processes sharing db: on
// PostgreSQL a session advisory lock (pg_try_advisory_lock) per name,
// held on a connection of its own until release, and lapsing with the
// connection; nil on SQLite, whose node is the database's only process.
func DBClaims(db *sqldb.DB) Claimer {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	return pgClaims{db.W}
}

type pgClaims struct{ db *sql.DB }

// releaseTimeout bounds the unlock of a claim.
const releaseTimeout = 5 * time.Second

func (c pgClaims) Claim(ctx context.Context, name string) (func(), bool, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("proposals: claim %s: %w", name, err)
	}
	key := sqldb.LockKey(name)
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("proposals: claim %s: %w", name, err)
	}
	if !ok {
		conn.Close()
		return nil, false, nil
	}
	return func() {
		// Unlocked explicitly: the pool keeps the connection, and the
		// lock with it, otherwise. Should the unlock fail, the
		// connection is dropped, which releases the lock too.
		// Bounded: a database that does not answer must not hold the
		// caller (the connection dropped then releases the lock).
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discards the connection
		}
		conn.Close()
	}, true, nil
}
