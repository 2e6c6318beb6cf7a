package snapnostr_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// A stored request that reached only relay B while the node could not
// reach B, older than the newest request processed through relay A, is
// processed once after a restart that finds B back. The checkpoint
// resumes each relay from its own point: before, it kept only the newest
// processed created_at, the restarted inbox asked every relay for what
// was newer than that minus the lookback, and the request on B was never
// received.
func TestInboxResumesEachRelayAfterARestart(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		aURL, bURL := startRelay(t), startRelay(t)
		agent, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		self := agent.Address(identity.Mainnet)
		var calls atomic.Int32
		server := snap.NewServer(snap.ServerConfig{Key: agent, Router: countingRouter(&calls), Logger: quiet(),
			MaxResponseSize: relay.MaxNIP44Plain,
			Validator:       snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
		target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
		get := client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true}
		requester := func(urls []string, ago time.Duration) *client.Nostr {
			k, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			p := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: quiet()})
			p.Start(ctx)
			t.Cleanup(func() { cancel(); p.Close() })
			return client.NewNostr(client.NostrConfig{Key: k, Relays: p, Logger: quiet(),
				Now: func() time.Time { return time.Now().Add(-ago) }})
		}

		// start runs an inbox on a pool of its own over both relays, B
		// reachable unless toB is cut, with the checkpoint kept in the
		// database at dsn; stop ends it and closes the database.
		toB := &relaytest.Cuttable{URL: bURL} // the running inbox's way to B
		start := func() (pool *relay.Pool, stop func()) {
			db := testdb.Open(t, dsn)
			cp, err := snapnostr.OpenCheckpoint(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			pool = relay.NewPool(relay.PoolConfig{URLs: []string{aURL, bURL}, Logger: quiet(),
				BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Dial: toB.Dial})
			pool.Start(ctx)
			inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: pool, Handler: server,
				Checkpoint: cp, Logger: quiet(), Workers: 2, Lookback: 20 * time.Second})
			done := make(chan error, 1)
			go func() { done <- inbox.Run(ctx) }()
			select {
			case <-inbox.Ready():
			case err := <-done:
				t.Fatalf("inbox: %v", err)
			}
			stopped := false
			stop = func() {
				if stopped {
					return
				}
				stopped = true
				cancel()
				if err := <-done; err != nil {
					t.Errorf("inbox: %v", err)
				}
				pool.Close()
				db.Close()
			}
			t.Cleanup(stop)
			return pool, stop
		}

		// The first run (its lookback 20 s): B brings a request dated 15
		// s ago, then becomes unreachable; a request dated 30 s ago, older
		// than the newest processed minus the lookback but not than B's
		// own point minus it, is stored on B alone, and one dated now,
		// through A, is processed.
		pool, stop := start()
		waitUntil(t, "the inbox on both relays", func() bool {
			h := pool.Health()
			return h[0].State == relay.StateConnected && h[1].State == relay.StateConnected
		})
		rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer rcancel()
		if _, err := requester([]string{bURL}, 15*time.Second).Request(rctx, target, get); err != nil {
			t.Fatalf("request through B: %v", err)
		}
		toB.Cut()
		waitUntil(t, "B seen down", func() bool { return pool.Health()[1].State != relay.StateConnected })
		answered := make(chan error, 1)
		go func() {
			_, err := requester([]string{bURL}, 30*time.Second).Request(rctx, target, get)
			answered <- err
		}()
		waitUntil(t, "the request stored on B", func() bool { return len(storedRequests(t, bURL, agent)) == 2 })
		if _, err := requester([]string{aURL}, 0).Request(rctx, target, get); err != nil {
			t.Fatalf("request through A: %v", err)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("first run: %d requests handled, want 2", n)
		}
		stop()

		// The restart, B reachable again: B's request is processed, and
		// the two processed before are not processed again.
		toB.Restore()
		start()
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("the request stored on B while the node could not reach it: %v", err)
			}
		case <-rctx.Done():
			t.Fatal("the request stored on B while the node could not reach it was not answered after the restart")
		}
		// The relays redelivered the stored requests before their EOSE,
		// and so before Ready: those processed before were not queued.
		if n := calls.Load(); n != 3 {
			t.Fatalf("%d requests handled, want 3", n)
		}
	})
}

// reachedRecorder is a MemoryCheckpoint that records the newest point
// written for each relay and counts the writes.
type reachedRecorder struct {
	*snapnostr.MemoryCheckpoint
	mu      sync.Mutex
	writes  int
	written map[string]nostr.Timestamp
}

func (r *reachedRecorder) Reached(ctx context.Context, points map[string]nostr.Timestamp) error {
	r.mu.Lock()
	r.writes++
	for url, at := range points {
		r.written[url] = max(r.written[url], at)
	}
	r.mu.Unlock()
	return r.MemoryCheckpoint.Reached(ctx, points)
}

func (r *reachedRecorder) state(url string) (writes int, point nostr.Timestamp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.written[url]
}

// The relays' points a running inbox writes (every minute) never pass a
// request it accepted and has not finished: a node that stops uncleanly
// then asks the relay again, after its restart, for that request. Before,
// each write took the newest created_at the relay had brought: a request
// dated 30 s ago still being handled when one dated now came was more
// than the lookback (5 s) behind the point written, and a crash then lost
// it for good.
func TestInboxRelayPointWaitsForTheRequestsInFlight(t *testing.T) {
	url := startRelay(t)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	router := snap.NewRouter()
	router.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		if calls.Add(1) == 1 { // the first request is slow
			close(entered)
			<-release
		}
		return map[string]any{"task": map[string]any{"id": "t"}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: quiet(),
		MaxResponseSize: relay.MaxNIP44Plain,
		Validator:       snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet()})
	pool.Start(ctx)
	defer pool.Close()
	cp := &reachedRecorder{MemoryCheckpoint: snapnostr.NewMemoryCheckpoint(), written: map[string]nostr.Timestamp{}}
	// A request processed a minute ago: the inbox listens from then
	// (less the lookback), as one running for a while does.
	if err := cp.Done(ctx, "earlier", nostr.Timestamp(time.Now().Add(-time.Minute).Unix())); err != nil {
		t.Fatal(err)
	}
	const lookback = 5 * time.Second
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: pool, Handler: server,
		Checkpoint: cp, Logger: quiet(), Workers: 2, Lookback: lookback})
	snapnostr.SetReachEvery(inbox, 10*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("inbox: %v", err)
		}
	}()
	// Before Run is waited for: its workers finish first.
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()
	<-inbox.Ready()

	target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
	get := client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true}
	requester := func(ago time.Duration) *client.Nostr {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		p := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet()})
		p.Start(ctx)
		t.Cleanup(func() { p.Close() })
		return client.NewNostr(client.NostrConfig{Key: k, Relays: p, Logger: quiet(),
			Now: func() time.Time { return time.Now().Add(-ago) }})
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	const ago = 30 * time.Second
	slowAt := nostr.Timestamp(time.Now().Add(-ago).Unix())
	slow := make(chan error, 1)
	go func() {
		_, err := requester(ago).Request(rctx, target, get)
		slow <- err
	}()
	select {
	case <-entered:
	case <-rctx.Done():
		t.Fatal("the slow request was not handled")
	}
	if _, err := requester(0).Request(rctx, target, get); err != nil {
		t.Fatalf("the request dated now: %v", err)
	}
	// Three writes after the request dated now was answered.
	writes, _ := cp.state(url)
	waitUntil(t, "three writes of the points", func() bool { n, _ := cp.state(url); return n >= writes+3 })
	if _, point := cp.state(url); point-nostr.Timestamp(lookback/time.Second) > slowAt {
		t.Fatalf("the point written, %v, is more than the lookback (%v) past a request still being handled (%v): a crash now loses that request",
			point.Time().UTC(), lookback, slowAt.Time().UTC())
	}
	unblock()
	if err := <-slow; err != nil {
		t.Fatalf("the slow request: %v", err)
	}
	// Once it is finished, the points written move on.
	now := nostr.Timestamp(time.Now().Add(-2 * time.Second).Unix())
	waitUntil(t, "the point past the request dated now", func() bool { _, p := cp.state(url); return p >= now })
}
