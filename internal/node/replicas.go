package node

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// The replay store of a database tells the inbox which requests another
// process took.
var _ snapnostr.Recorded = (*sqlstore.ReplayStore)(nil)

// openShares returns the inbox's share of the requests among the
// processes running this identity on db (snapnostr.Replicas), or nil
// unless db is PostgreSQL, the one database several processes share.
// receiving tells whether this process receives requests now.
// onChange is told the number of replicas sharing the requests.
func openShares(ctx context.Context, db *sqldb.DB, receiving func() bool, onChange func(int), logger *slog.Logger) (*snapnostr.Replicas, error) {
	if db == nil || db.Dialect != sqldb.Postgres {
		return nil, nil
	}
	r, err := snapnostr.OpenReplicas(ctx, db, snapnostr.ReplicasConfig{Receiving: receiving, OnChange: onChange, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return r, nil
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

// keyLimitShare keeps the per-key Nostr limiter at this process's share
// of the configured allowance. With N processes sharing the requests out,
// each sees about one in N of a key's requests (they are shared by event
// id), so each allows one N-th of the rate and of the burst (at least 1),
// and the key gets about its allowance in all. Safe for concurrent use.
type keyLimitShare struct {
	mu    sync.Mutex
	lim   *ratelimit.Limiter
	rate  float64
	burst int
	alive int
}

func newKeyLimitShare(lim *ratelimit.Limiter, rate float64, burst int) *keyLimitShare {
	return &keyLimitShare{lim: lim, rate: rate, burst: burst, alive: 1}
}

// set takes a new configured rate and burst (a reload).
func (k *keyLimitShare) set(rate float64, burst int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rate, k.burst = rate, burst
	k.apply()
}

// setAlive takes the number of processes sharing the requests.
func (k *keyLimitShare) setAlive(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.alive = max(n, 1)
	k.apply()
}

func (k *keyLimitShare) apply() {
	n := float64(k.alive)
	burst := k.burst
	if burst > 0 {
		burst = max(1, int(math.Ceil(float64(burst)/n)))
	}
	k.lim.SetRate(k.rate/n, burst)
}
