package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/tasks"
)

// testRelay is an embedded relay on a fixed loopback address that can be
// killed and restarted there with its database.
type testRelay struct {
	t    *testing.T
	addr string
	db   string
	stop context.CancelFunc
	done chan error
}

func newTestRelay(t *testing.T) *testRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &testRelay{t: t, addr: ln.Addr().String(), db: filepath.Join(t.TempDir(), "relay.db")}
	r.serve(ln)
	t.Cleanup(r.kill)
	return r
}

func (r *testRelay) url() string { return "ws://" + r.addr }

func (r *testRelay) serve(ln net.Listener) {
	rel, err := embedded.New(embedded.Config{DBPath: r.db})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan error, 1)
	go func() { r.done <- rel.Serve(ctx, ln) }()
}

func (r *testRelay) kill() {
	if r.stop != nil {
		r.stop()
		<-r.done
		r.stop = nil
	}
}

func (r *testRelay) restart() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port is free once the old listener closed
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(ln)
}

// replies returns the distinct reply events on the relays to request
// event reqID, authored by pub. (go-nostr's own Relay races when a
// connection closes, so the test reads through the project's pool.)
func replies(t *testing.T, urls []string, pub, reqID string) map[string]*nostr.Event {
	t.Helper()
	out := map[string]*nostr.Event{}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p := relay.NewPool(relay.PoolConfig{URLs: []string{u}, Logger: slog.New(slog.DiscardHandler)})
		p.Start(ctx)
		evs, err := p.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{pub}, Tags: nostr.TagMap{"e": {reqID}}})
		p.Close()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			out[ev.ID] = ev
		}
	}
	return out
}

// Two relays, one killed mid-run and restarted: every request is answered,
// and none twice.
func TestTwoRelaysOneKilledMidRun(t *testing.T) {
	r1, r2 := newTestRelay(t), newTestRelay(t)
	urls := []string{r1.url(), r2.url()}
	n, _ := startNode(t, func(c *config.Config) { c.Relays = urls })
	alice := newRequester(t, urls)

	const perPhase = 10
	var mu sync.Mutex
	var requestIDs []string
	send := func(phase string) {
		var wg sync.WaitGroup
		for i := range perPhase {
			wg.Go(func() {
				body, _ := json.Marshal(text(fmt.Sprintf("%s-%d", phase, i)))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				resp, err := alice.client.Request(ctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
					client.NostrRequest{Method: "message/send", Payload: body, Persist: true})
				if err != nil {
					t.Errorf("%s request %d: %v", phase, i, err)
					return
				}
				var reqID string
				for _, tag := range resp.Event.Tags {
					if len(tag) > 1 && tag[0] == "e" {
						reqID = tag[1]
					}
				}
				mu.Lock()
				requestIDs = append(requestIDs, reqID)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	send("before")
	r1.kill()
	send("during")
	r1.restart()
	// Give the pools time to reconnect and resubscribe to r1, which
	// replays what it stored; none of it may be processed again.
	time.Sleep(3 * time.Second)
	send("after")
	time.Sleep(time.Second)

	if len(requestIDs) != 3*perPhase {
		t.Fatalf("%d requests answered, want %d", len(requestIDs), 3*perPhase)
	}
	for _, id := range requestIDs {
		if got := replies(t, urls, n.NostrPublicKey(), id); len(got) != 1 {
			t.Errorf("request %s has %d distinct replies, want exactly 1", id, len(got))
		}
	}
	list, err := n.Tasks.List(context.Background(), tasks.Filter{Owner: alice.key.Address(identity.Mainnet)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3*perPhase {
		t.Errorf("%d tasks created, want %d (one per request)", len(list), 3*perPhase)
	}
}

// Stored requests (4339) published while the node is down are answered
// once when it starts again.
func TestStoredRequestsAnsweredAfterRestart(t *testing.T) {
	r := newTestRelay(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := func(c *config.Config) { c.Relays = []string{r.url()}; c.DataDir = dataDir }
	n, stop := startNode(t, cfg)
	addr, pub := n.Address(), n.NostrPublicKey()
	alice := newRequester(t, []string{r.url()})
	// One answered request while the node runs, so it has a checkpoint.
	alice.call(t, n, "message/send", text("warm-up"), true)
	stop()

	// While the node is down: three stored requests, each given up on.
	var reqIDs []string
	for i := range 3 {
		body, _ := json.Marshal(text(fmt.Sprintf("offline-%d", i)))
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := alice.client.Request(ctx, client.Target{Address: addr, PubKey: pub},
			client.NostrRequest{Method: "message/send", Payload: body, Persist: true})
		cancel()
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("request to a stopped node: %v, want a time-out", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := alice.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{alice.key.NostrPublicKey()}, Tags: nostr.TagMap{"p": {pub}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if len(replies(t, []string{r.url()}, pub, ev.ID)) == 0 {
			reqIDs = append(reqIDs, ev.ID)
		}
	}
	if len(reqIDs) != 3 {
		t.Fatalf("%d unanswered stored requests on the relay, want 3", len(reqIDs))
	}

	// The node starts again and catches up.
	n2, _ := startNode(t, cfg)
	if n2.Address() != addr {
		t.Fatal("the restarted node has another identity")
	}
	ck, err := nip44.GenerateConversationKey(pub, alice.key.NostrSecretKey())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range reqIDs {
		var got map[string]*nostr.Event
		for time.Now().Before(deadline) {
			if got = replies(t, []string{r.url()}, pub, id); len(got) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(got) != 1 {
			t.Fatalf("stored request %s: %d replies after restart, want 1", id, len(got))
		}
		for _, ev := range got {
			plain, err := nip44.Decrypt(ev.Content, ck)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Payload map[string]any `json:"payload"`
			}
			json.Unmarshal([]byte(plain), &m)
			if m.Payload["task"] == nil {
				t.Errorf("reply to %s: %s", id, plain)
			}
		}
	}
	// A second restart answers nothing again.
	time.Sleep(500 * time.Millisecond)
	for _, id := range reqIDs {
		if got := replies(t, []string{r.url()}, pub, id); len(got) != 1 {
			t.Errorf("stored request %s: %d replies, want exactly 1", id, len(got))
		}
	}
}
