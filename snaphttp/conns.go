package snaphttp

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/snap"
)

// DefaultTCPConns returns the default caps on the TCP connections a
// Server holds, for a process allowed nofile open files (0: unknown, taken
// as 1,024): half of it in all, between 64 and 16,384, so that the
// databases, the workspace, the relay and the logs keep the other half;
// and a sixteenth of that per peer, at least 8. An explicit total without
// a per-peer cap gets a sixteenth of it per peer too.
func DefaultTCPConns(nofile uint64) (total, perPeer int) {
	if nofile == 0 {
		nofile = 1024
	}
	total = int(min(max(nofile/2, 64), 16384))
	return total, perPeerConns(total)
}

// perPeerConns is the default per-peer cap for a total of total: a
// sixteenth, at least 8 (and at most total).
func perPeerConns(total int) int { return min(max(total/16, 8), total) }

// refuseConns returns the Refuse of a peercap.Listener capping the
// connections at total in all and perPeer per peer: it answers a
// connection over a cap with status, as writeError would, naming the
// cap as the WebSocket caps' refusals do (limit; scope "peer" or
// "node").
func refuseConns(total, perPeer int) func(c net.Conn, _ netip.Addr, status int) {
	return func(c net.Conn, _ netip.Addr, status int) {
		msg, code, limit, scope := "too many connections; retry later", snap.CodeServiceUnavailable, total, "node"
		if status == http.StatusTooManyRequests {
			msg, code, limit, scope = "too many connections from this address; retry later", snap.CodeRateLimitExceeded, perPeer, "peer"
		}
		h := make(http.Header, 4)
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Retry-After", "1")
		h.Set("SNAP-Version", snap.ProtocolVersion)
		peercap.WriteRefusal(c, status, h, errorBody(status, code, msg, map[string]any{"retryAfter": 1, "limit": limit, "scope": scope}))
	}
}

// newConnWait is how long, at shutdown, a connection that has sent no
// request yet is waited for: net/http's http.Server.Shutdown takes one
// silent for that long for idle and closes it.
const newConnWait = 5 * time.Second

// freshConns tracks the connections that have sent no request yet
// (http.StateNew). http.Server.Shutdown waits for such a connection
// (newConnWait), but a request it then reads is dropped, its connection
// closed without an answer: at shutdown Serve disables keep-alives and
// waits for these connections (await) before it calls Shutdown, so that
// their request is answered, then their connection closed.
type freshConns struct {
	mu    sync.Mutex
	since map[net.Conn]time.Time
	// changed is closed, and replaced, whenever a connection leaves.
	changed chan struct{}
}

func newFreshConns() *freshConns {
	return &freshConns{since: make(map[net.Conn]time.Time), changed: make(chan struct{})}
}

// state is the http.Server's ConnState hook.
func (f *freshConns) state(c net.Conn, st http.ConnState) {
	if st == http.StateIdle {
		return // it sent a request before: it is not among them
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		f.since[c] = time.Now()
		return
	}
	if _, ok := f.since[c]; ok {
		delete(f.since, c)
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// await returns once no connection has been waiting for its first
// request for less than wait, or when ctx ends.
func (f *freshConns) await(ctx context.Context, wait time.Duration) {
	for {
		f.mu.Lock()
		var youngest time.Time
		for _, t := range f.since {
			if t.After(youngest) {
				youngest = t
			}
		}
		changed := f.changed
		f.mu.Unlock()
		left := time.Until(youngest.Add(wait))
		if youngest.IsZero() || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// onceListener is a listener whose Close closes it once and returns
// that first call's error ever after: Serve closes it to stop accepting
// before http.Server.Shutdown, which closes it again.
type onceListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *onceListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}
