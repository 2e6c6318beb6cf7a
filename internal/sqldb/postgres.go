package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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

// ErrNotPostgres: Listen was called on a SQLite database, which has no
// notifications (and, one process to a file, no other writer to hear).
// It wraps errors.ErrUnsupported.
var ErrNotPostgres = fmt.Errorf("sqldb: notifications need PostgreSQL: %w", errors.ErrUnsupported)

// Listen calls fn with the payload of every PostgreSQL notification on
// channel (LISTEN), received on a connection of its own outside the
// pool, until ctx ends or that connection fails; it calls listening once
// the server has taken the LISTEN, so that a caller can read what it may
// have missed before. It returns ctx's error or the failure; a caller that
// wants to go on listening calls it again (notifications sent in between
// are lost). fn runs in Listen's goroutine and should return quickly.
func (db *DB) Listen(ctx context.Context, channel string, listening func(), fn func(payload string)) error {
	if db.pg == nil {
		return ErrNotPostgres
	}
	conn, err := pgx.ConnectConfig(ctx, db.pg)
	if err != nil {
		return fmt.Errorf("sqldb: listen on %s: connect: %w", channel, err)
	}
	defer func() {
		// A connection that ends with ctx would refuse the close's own
		// round trip: give it one of its own.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = conn.Close(c)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("sqldb: listen on %s: %w", channel, err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sqldb: listen on %s: %w", channel, err)
		}
		fn(n.Payload)
	}
}

// closeTimeout bounds the goodbye of Listen's connection.
const closeTimeout = 5 * time.Second
