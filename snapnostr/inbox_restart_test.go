package snapnostr_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
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
		// reachable unless cutB, with the checkpoint kept in the
		// database at dsn; stop ends it and closes the database.
		var mu sync.Mutex
		var toB relay.Conn // the running inbox's connection to B
		start := func(cutB *atomic.Bool) (pool *relay.Pool, stop func()) {
			db := testdb.Open(t, dsn)
			cp, err := snapnostr.OpenCheckpoint(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			pool = relay.NewPool(relay.PoolConfig{URLs: []string{aURL, bURL}, Logger: quiet(),
				BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
				Dial: func(ctx context.Context, url string) (relay.Conn, error) {
					if url == bURL && cutB.Load() {
						return nil, net.ErrClosed
					}
					c, err := relay.DialWebsocket(ctx, url)
					if err == nil && url == bURL {
						mu.Lock()
						toB = c
						mu.Unlock()
					}
					return c, err
				}})
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
		var cutB atomic.Bool
		pool, stop := start(&cutB)
		waitUntil(t, "the inbox on both relays", func() bool {
			h := pool.Health()
			return h[0].State == relay.StateConnected && h[1].State == relay.StateConnected
		})
		rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer rcancel()
		if _, err := requester([]string{bURL}, 15*time.Second).Request(rctx, target, get); err != nil {
			t.Fatalf("request through B: %v", err)
		}
		cutB.Store(true)
		mu.Lock()
		toB.Close()
		mu.Unlock()
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
		cutB.Store(false)
		start(&cutB)
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
