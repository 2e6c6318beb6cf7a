package snapnostr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// switchShares is a Shares whose answer the test sets.
type switchShares struct {
	mine  atomic.Bool
	grace time.Duration
}

func (s *switchShares) Mine([32]byte) bool   { return s.mine.Load() }
func (s *switchShares) Counted() bool        { return true }
func (s *switchShares) Grace() time.Duration { return s.grace }

// countingRouter answers tasks/get and counts the calls.
func countingRouter(calls *atomic.Int32) *snap.Router {
	r := snap.NewRouter()
	r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		calls.Add(1)
		return map[string]any{"task": map[string]any{"id": "t"}}, nil
	})
	return r
}

// waitUntil polls cond every 10 ms until it holds, or fails the test
// after 10 s naming what it waited for.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// A request that is another replica's is not opened: it is kept for the
// grace and then forgotten, never answered here.
func TestInboxLeavesOtherReplicasRequests(t *testing.T) {
	var calls atomic.Int32
	sh := &switchShares{grace: 50 * time.Millisecond}
	n := newStreamNet(t, countingRouter(&calls), 4, func(c *snapnostr.InboxConfig) { c.Shares = sh })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		done <- err
	}()
	waitUntil(t, "the request forgotten", func() bool { return n.inbox.Shared().Left == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("another replica's request was answered here")
	}
	if st := n.inbox.Shared(); calls.Load() != 0 || st.Kept != 1 || st.Taken != 0 || st.Now != 0 {
		t.Fatalf("handler calls %d, shares %+v; want 0 calls, 1 kept, 0 taken, none kept now", calls.Load(), st)
	}
}

// A request kept for another replica is taken up and answered once it
// becomes this one's (the other stopped receiving).
func TestInboxTakesUpARequestThatBecomesItsOwn(t *testing.T) {
	var calls atomic.Int32
	sh := &switchShares{grace: time.Hour}
	n := newStreamNet(t, countingRouter(&calls), 4, func(c *snapnostr.InboxConfig) { c.Shares = sh })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		resp *client.NostrResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		done <- answer{resp, err}
	}()
	waitUntil(t, "the request kept", func() bool { return n.inbox.Shared().Now == 1 })
	if calls.Load() != 0 {
		t.Fatal("a request kept for another replica was opened")
	}
	sh.mine.Store(true)
	a := <-done
	if a.err != nil {
		t.Fatalf("request taken up: %v", a.err)
	}
	if p := payload(t, a.resp); p["task"] == nil {
		t.Fatalf("answer: %v", p)
	}
	if st := n.inbox.Shared(); calls.Load() != 1 || st.Kept != 1 || st.Taken != 1 || st.Now != 0 {
		t.Fatalf("handler calls %d, shares %+v; want 1 call, 1 kept and taken up", calls.Load(), st)
	}
}
