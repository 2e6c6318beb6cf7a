package sqldb

import (
	"context"
	"database/sql"
	"net"
	"sync/atomic"
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

// DefaultConnectTimeout bounds a connection to PostgreSQL, its TCP
// connect, TLS and start-up, when the DSN names no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// Keepalive and user time-out of the connections to PostgreSQL: a server
// whose machine or network went away (a failover, a partition) without
// closing the connections is found within about deadPeerAfter, whether
// the connection was idle (keepalive probes unanswered) or waiting for
// what it sent to be acknowledged (TCP_USER_TIMEOUT, where the system
// has it), instead of the system's default of minutes (15 minutes of
// retransmissions on Linux). The statement waiting on it fails, the pool
// drops the connection and makes a new one.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	deadPeerAfter     = keepAliveIdle + keepAliveCount*keepAliveInterval
)

// guardConnections bounds how long a connection of cfg waits for a
// server that went away: its making by DefaultConnectTimeout unless the
// DSN set connect_timeout, and, once made, by the keepalive and user
// time-out above. Without them a connection made to an address that no
// longer answers waited for as long as its caller's context, which a
// Nostr request or a background loop (the audit sealer, the reconcile
// passes) does not bound.
func guardConnections(cfg *pgx.ConnConfig) {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
		Control: setUserTimeout,
	}
	cfg.DialFunc = d.DialContext
}
