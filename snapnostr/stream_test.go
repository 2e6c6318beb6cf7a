package snapnostr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// streamNet is an embedded relay on a loopback socket, an agent answering
// through an Inbox, and a requester's client, each with its own pool.
type streamNet struct {
	agent     *identity.Key
	target    client.Target
	client    *client.Nostr
	requester *identity.Key
	pool      *relay.Pool // the requester's
	stop      context.CancelFunc
	inboxDone chan error
	inbox     *snapnostr.Inbox
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startRelay serves an embedded relay, in memory, until the test ends,
// and returns its URL.
func startRelay(t *testing.T) string {
	t.Helper()
	return startRelayWith(t, embedded.Config{})
}

// startRelayWith is startRelay with the relay's other settings from cfg
// (its database and logger are set here).
func startRelayWith(t *testing.T, cfg embedded.Config) string {
	t.Helper()
	cfg.DBPath, cfg.Logger = ":memory:", quiet()
	return relaytest.Serve(t, cfg)
}

// newPool returns a pool on the relay at url, closed when the test ends.
func newPool(t *testing.T, url string) *relay.Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet()})
	p.Start(ctx)
	t.Cleanup(func() { cancel(); p.Close() })
	return p
}

func newStreamNet(t *testing.T, router *snap.Router, streams int, opts ...func(*snapnostr.InboxConfig)) *streamNet {
	t.Helper()
	url := startRelay(t)
	pool := func() *relay.Pool { return newPool(t, url) }
	var err error
	n := &streamNet{inboxDone: make(chan error, 1)}
	if n.agent, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	if n.requester, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	self := n.agent.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: n.agent, Router: router, Logger: quiet(),
		MaxResponseSize: relay.MaxNIP44Plain,
		Validator:       snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	cfg := snapnostr.InboxConfig{Key: n.agent, Transport: pool(), Handler: server,
		Logger: quiet(), Workers: 2, Streams: streams}
	for _, o := range opts {
		o(&cfg)
	}
	inbox := snapnostr.NewInbox(cfg)
	n.inbox = inbox
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() { n.inboxDone <- inbox.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-n.inboxDone })
	select {
	case <-inbox.Ready():
	case err := <-n.inboxDone:
		t.Fatalf("inbox: %v", err)
	}
	n.pool = pool()
	n.client = client.NewNostr(client.NostrConfig{Key: n.requester, Relays: n.pool, Logger: quiet()})
	n.target = client.Target{Address: self, PubKey: n.agent.NostrPublicKey()}
	return n
}

// countRouter streams {"n":1…3} then answers {"done":3}; tasks/get answers
// at once; test/wait streams one event, then waits for its release or its
// context's end.
func countRouter(release <-chan struct{}) *snap.Router {
	r := snap.NewRouter()
	r.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		for i := 1; i <= 3; i++ {
			if err := emit(map[string]any{"n": i}); err != nil {
				return nil, err
			}
		}
		return map[string]any{"done": 3}, nil
	})
	r.HandleStream("tasks/resubscribe", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		emit(map[string]any{"n": 1})
		select {
		case <-release:
			return map[string]any{"ended": "released"}, nil
		case <-ctx.Done():
			return map[string]any{"ended": "context"}, nil
		}
	})
	r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "t"}}, nil
	})
	return r
}

func payload(t *testing.T, r *client.NostrResponse) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each event is its own Nostr event of the request's kind, tagged p and e,
// in order, and the final response comes last.
func TestInboxStreamsEvents(t *testing.T) {
	n := newStreamNet(t, countRouter(nil), 4)
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprint("persist=", persist), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var events []*client.NostrResponse
			final, err := n.client.RequestStream(ctx, n.target, client.NostrRequest{Method: "message/stream", Payload: []byte(`{}`), Persist: persist},
				func(ev *client.NostrResponse) error { events = append(events, ev); return nil })
			if err != nil {
				t.Fatal(err)
			}
			kind := relay.KindEphemeral
			if persist {
				kind = relay.KindMessage
			}
			var got []any
			for _, ev := range events {
				if ev.Type != snap.TypeEvent || ev.Method != "message/stream" || ev.To != n.requester.Address(identity.Mainnet) {
					t.Fatalf("event envelope %+v", ev.Message)
				}
				if ev.Event.Kind != kind || !tagged(ev.Event, "p", n.requester.NostrPublicKey()) || eTag(ev.Event) == "" {
					t.Fatalf("nostr event kind %d tags %v", ev.Event.Kind, ev.Event.Tags)
				}
				got = append(got, payload(t, ev)["n"])
			}
			if fmt.Sprint(got) != "[1 2 3]" || payload(t, final)["done"] != float64(3) || final.Type != snap.TypeResponse {
				t.Fatalf("events %v, final %s", got, final.Payload)
			}
			for _, ev := range events {
				if eTag(ev.Event) != eTag(final.Event) {
					t.Fatal("the final response and the events answer different requests")
				}
			}
		})
	}
}

// eTag returns the value of the one e tag of ev, "" unless there is
// exactly one.
func eTag(ev *nostr.Event) string {
	var vals []string
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == "e" {
			vals = append(vals, tag[1])
		}
	}
	if len(vals) != 1 {
		return ""
	}
	return vals[0]
}

func tagged(ev *nostr.Event, name, value string) bool {
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == name && tag[1] == value {
			return true
		}
	}
	return false
}

// A requester that takes the first response, as SDK peers do, gets the
// final one: events are not responses.
func TestInboxStreamToResponseOnlyClient(t *testing.T) {
	n := newStreamNet(t, countRouter(nil), 4)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "message/stream", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Type != snap.TypeResponse || payload(t, resp)["done"] != float64(3) {
		t.Fatalf("first response: %s %s", resp.Type, resp.Payload)
	}
}

// Streams run beside the workers: a long stream does not hold up plain
// requests; past the stream limit a stream is refused at once (5003); when
// the inbox stops, an open stream ends and its final response still goes
// out.
func TestInboxStreamLimitsAndShutdown(t *testing.T) {
	release := make(chan struct{})
	n := newStreamNet(t, countRouter(release), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	type result struct {
		events []*client.NostrResponse
		final  *client.NostrResponse
		err    error
	}
	first := make(chan struct{})
	long := make(chan result, 1)
	go func() {
		var r result
		r.final, r.err = n.client.RequestStream(ctx, n.target, client.NostrRequest{Method: "tasks/resubscribe", Payload: []byte(`{}`)},
			func(ev *client.NostrResponse) error {
				r.events = append(r.events, ev)
				close(first)
				return nil
			})
		long <- r
	}()
	select {
	case <-first: // the stream holds the only slot
	case r := <-long:
		t.Fatalf("the long stream ended early: %v", r.err)
	}

	refused, err := n.client.RequestStream(ctx, n.target, client.NostrRequest{Method: "message/stream", Payload: []byte(`{}`)},
		func(*client.NostrResponse) error { return errors.New("an event of a refused stream") })
	if err != nil {
		t.Fatal(err)
	}
	e, _ := payload(t, refused)["error"].(map[string]any)
	if e == nil || e["code"] != float64(snap.CodeServiceUnavailable) {
		t.Fatalf("second stream: %s, want 5003", refused.Payload)
	}
	// Two workers, both free: plain requests are answered meanwhile.
	for i := range 3 {
		resp, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		if err != nil || payload(t, resp)["task"] == nil {
			t.Fatalf("tasks/get %d during a stream: %v", i, err)
		}
	}

	n.stop() // the inbox stops: the stream's context ends
	r := <-long
	if r.err != nil || len(r.events) != 1 || payload(t, r.final)["ended"] != "context" {
		t.Fatalf("stream at shutdown: %d events, final %v, %v", len(r.events), r.final, r.err)
	}
	if err := <-n.inboxDone; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	n.inboxDone <- nil // for the cleanup
}

// heldNet is a streamNet with one inbox worker and a queue of queue
// requests, timed by clock, whose method test/hold keeps the worker until
// unhold (also run at the end of the test, before the inbox's cleanup,
// which waits for the worker). entered receives when the worker is held.
func heldNet(t *testing.T, queue int, clock *testclock.Clock) (n *streamNet, entered <-chan struct{}, unhold func()) {
	t.Helper()
	in, release := make(chan struct{}, 1), make(chan struct{})
	r := countRouter(nil)
	r.Handle("test/hold", func(ctx context.Context, req *snap.Verified) (any, error) {
		in <- struct{}{}
		<-release
		return map[string]any{"held": true}, nil
	})
	n = newStreamNet(t, r, 4, func(c *snapnostr.InboxConfig) { c.Workers, c.Queue, c.Now = 1, queue, clock.Now })
	var once sync.Once
	unhold = func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhold)
	return n, in, unhold
}
