package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snapnostr"
)

// openShares returns the inbox's share of the requests among the
// processes running this identity on db (snapnostr.Replicas), or nil
// unless db is PostgreSQL, the one database several processes share.
// receiving tells whether this process receives requests now.
func openShares(ctx context.Context, db *sqldb.DB, receiving func() bool, logger *slog.Logger) (*snapnostr.Replicas, error) {
	if db == nil || db.Dialect != sqldb.Postgres {
		return nil, nil
	}
	r, err := snapnostr.OpenReplicas(ctx, db, snapnostr.ReplicasConfig{Receiving: receiving, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return r, nil
}

// runShares runs r's beats until the returned stop is called or ctx
// ends; stop waits for r to leave.
func runShares(ctx context.Context, r *snapnostr.Replicas) func() error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

// receiving reports whether the inbox is subscribed and at least one
// relay of the pool connected: a replica that is not receiving leaves its
// share of the requests to the others.
func receiving(in *snapnostr.Inbox, pool *relay.Pool) bool {
	if in == nil {
		return false
	}
	select {
	case <-in.Ready():
	default:
		return false
	}
	for _, st := range pool.Health() {
		if st.State == relay.StateConnected {
			return true
		}
	}
	return false
}
