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

// Two replicas of one identity on one PostgreSQL database and one relay,
// their beats driven by hand on a test clock. A request comes in the
// newcomer's first beat, when neither counts the other yet. The older
// replica refuses it (its own rate limit, 5002) and records the delivery
// as it answers; the newcomer would answer it with a result under the
// request's own record. The requester must get one answer, the refusal:
// the newcomer takes no share until the other counts it, and takes up
// what it set aside meanwhile only if nobody answered it.
func TestReplicaJoinAnswersOnce(t *testing.T) {
	dsn := testdb.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	db := testdb.Open(t, dsn)
	url := startRelay(t)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	router := snap.NewRouter()
	router.Handle("test/answer", func(context.Context, *snap.Verified) (any, error) {
		return map[string]any{"answered": true}, nil
	})
	t0 := time.Now()
	clock := testclock.New(t0)
	replica := func(lim snap.Limiter) (*snapnostr.Replicas, *snapnostr.Inbox) {
		reps, err := snapnostr.OpenReplicas(ctx, db, snapnostr.ReplicasConfig{Beat: time.Second, Now: clock.Now, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: quiet(), MaxResponseSize: relay.MaxNIP44Plain,
			Validator: snap.NewValidator(snap.Config{Self: self, Replay: store.ReplayStore()})})
		in := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: newPool(t, url), Handler: server, Logger: quiet(),
			Shares: reps, Replay: store.ReplayStore(), Now: clock.Now, KeyLimiter: lim})
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- in.Run(rctx) }()
		t.Cleanup(sync.OnceFunc(func() {
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}))
		<-in.Ready()
		return reps, in
	}
	step := func(at time.Time, rs ...*snapnostr.Replicas) {
		t.Helper()
		for _, r := range rs {
			if err := snapnostr.StepReplicas(ctx, r, at); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The older replica beats alone, then the newcomer starts: its first
	// beat, and the older one's next, which sees it for the first time.
	old, _ := replica(refuseAll{})
	step(t0, old)
	newcomer, newIn := replica(nil)
	step(t0.Add(time.Second), newcomer, old)
	clock.Advance(time.Second)

	requester, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewNostr(client.NostrConfig{Key: requester, Relays: newPool(t, url), Logger: quiet()})
	resp, err := c.Request(ctx, client.Target{Address: self, PubKey: agent.NostrPublicKey()},
		client.NostrRequest{Method: "test/answer", Payload: []byte(`{}`), Persist: true})
	if err != nil {
		t.Fatal(err)
	}
	reqID := (*resp.Event.Tags.GetFirst([]string{"e", ""}))[1]
	answers := func() []*nostr.Event {
		t.Helper()
		evs, err := newPool(t, url).Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage},
			Authors: []string{agent.NostrPublicKey()}, Tags: nostr.TagMap{"e": {reqID}}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}

	// Both beat on past the request's grace, and the newcomer reviews
	// what it set aside (beats first: a view older than the clock's now
	// would take every request).
	later := t0.Add(time.Second + newcomer.Grace() + time.Second)
	step(later, newcomer, old)
	clock.Advance(later.Sub(clock.Now()))
	for newIn.Shared().Left+newIn.Shared().Taken == 0 && len(answers()) < 2 {
		if ctx.Err() != nil {
			t.Fatal("the newcomer never settled the request, nor answered it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := newIn.Shared()
	evs := answers()
	if len(evs) != 1 || resp.ErrorCode() != snap.CodeRateLimitExceeded || st.Left != 1 {
		t.Fatalf("%d answers, the first %s %d; the newcomer %+v; want 1 answer, the older replica's 5002, the newcomer leaving the request",
			len(evs), resp.Type, resp.ErrorCode(), st)
	}
}
