package snapnostr_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// fixedShares is the Shares of a replica that owns every request or
// none, with a grace of a second.
type fixedShares bool

func (s fixedShares) Mine([32]byte) bool { return bool(s) }
func (fixedShares) Counted() bool        { return true }
func (fixedShares) Grace() time.Duration { return time.Second }

// refuseAll is a key limiter that refuses every key.
type refuseAll struct{}

func (refuseAll) Allow(string) (bool, time.Duration) { return false, time.Second }

// Two replicas of one identity on one PostgreSQL database and one relay.
// A streaming request is the first replica's share, but it is slow to
// take it: the second, finding no record of it when its grace passes,
// takes it up late and starts its stream. Meanwhile the owner refuses the
// request (its own rate limit, 5002: its transport does not tell stored
// requests from live ones, since a stored request over its key's rate
// waits for it instead) and records the delivery as it answers. The late stream must then publish nothing: its events went
// out before its final answer checked the record, and the requester got
// the refusal from one replica and a stream's events from the other.
func TestLateStreamPublishesNothingAfterTheOwnersAnswer(t *testing.T) {
	dsn := testdb.Postgres(t)
	store, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	url := startRelay(t)
	for _, method := range []string{"message/stream", "tasks/resubscribe"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			agent, err := identity.Generate() // a new identity: no request of the last test on its relay
			if err != nil {
				t.Fatal(err)
			}
			self := agent.Address(identity.Mainnet)
			entered, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
			router := snap.NewRouter()
			router.HandleStream(method, func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
				defer close(finished)
				close(entered)
				<-release
				for i := 1; i <= 3; i++ {
					if err := emit(map[string]any{"n": i}); err != nil {
						return nil, err
					}
				}
				return map[string]any{"done": 3}, nil
			})
			replica := func(shares fixedShares, now func() time.Time, lim snap.Limiter, tr snapnostr.Transport) (*snapnostr.Inbox, func()) {
				server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: quiet(), MaxResponseSize: relay.MaxNIP44Plain,
					Validator: snap.NewValidator(snap.Config{Self: self, Replay: store.ReplayStore()})})
				in := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: tr, Handler: server, Logger: quiet(),
					Shares: shares, Replay: store.ReplayStore(), Now: now, KeyLimiter: lim})
				rctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- in.Run(rctx) }()
				stop := sync.OnceValue(func() error { cancel(); return <-done })
				t.Cleanup(func() { stop() })
				<-in.Ready()
				return in, func() {
					if err := stop(); err != nil {
						t.Error(err)
					}
				}
			}

			// The late replica sets the request aside, and takes it up once
			// its grace has passed; its handler waits.
			clock := testclock.New(time.Now())
			late, stopLate := replica(false, clock.Now, nil, newPool(t, url))
			requester, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewNostr(client.NostrConfig{Key: requester, Relays: newPool(t, url), Logger: quiet()})
			type answer struct {
				resp *client.NostrResponse
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := c.Request(ctx, client.Target{Address: self, PubKey: agent.NostrPublicKey()},
					client.NostrRequest{Method: method, Payload: []byte(`{"taskId":"t"}`), Persist: true})
				answered <- answer{resp, err}
			}()
			for late.Shared().Now == 0 {
				if ctx.Err() != nil {
					t.Fatal("the late replica never received the request")
				}
				time.Sleep(time.Millisecond)
			}
			clock.Advance(2 * time.Second)
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the late replica never took the request up")
			}

			// The owner receives it now and refuses it.
			replica(true, time.Now, refuseAll{}, struct{ snapnostr.Transport }{newPool(t, url)})
			var a answer
			select {
			case a = <-answered:
			case <-ctx.Done():
				t.Fatal("no answer")
			}
			if a.err != nil || a.resp.Type != snap.TypeResponse || a.resp.ErrorCode() != snap.CodeRateLimitExceeded {
				t.Fatalf("the owner's answer: %v %+v; want 5002", a.err, a.resp)
			}

			// The late stream goes on, then stops.
			close(release)
			<-finished
			stopLate()

			reqID := (*a.resp.Event.Tags.GetFirst([]string{"e", ""}))[1]
			evs, err := newPool(t, url).Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{agent.NostrPublicKey()},
				Tags: nostr.TagMap{"e": {reqID}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				var types []string
				for _, ev := range evs {
					plain, err := snapnostr.NewSealer(requester, 1).Open(agent.NostrPublicKey(), ev.Content)
					if err != nil {
						t.Fatal(err)
					}
					types = append(types, string(plain))
				}
				t.Fatalf("%d events answer the request, want 1 (the owner's refusal): %v", len(evs), types)
			}
		})
	}
}
