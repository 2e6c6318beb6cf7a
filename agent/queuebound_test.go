package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// trySend sends a free-text task of who's and returns the service's error.
func (r *rig) trySend(who, text string) error {
	payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": text}}}})
	_, err := taskstest.Send(context.Background(), r.svc, who, payload)
	return err
}

// queued is the number of jobs the store holds that wait for a slot or are
// worked on.
func (r *rig) queued(t *testing.T) int64 {
	t.Helper()
	n, err := r.store.CountByStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n[agent.Pending] + n[agent.Running] + n[agent.Reviewing]
}

// known is a tasks.Admitter's lookup of a peer the node knows: every
// requester is, so that the tests of the other bounds meet no newcomers'
// share.
func known() bool { return true }

// wantRefusal fails t unless err is the *snap.Error of code whose data
// holds want.
func wantRefusal(t *testing.T, err error, code snap.Code, want map[string]any) {
	t.Helper()
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("got %v, want a SNAP %d", err, code)
	}
	data := se.Data
	for k, v := range want {
		if fmt.Sprint(data[k]) != fmt.Sprint(v) {
			t.Fatalf("data %v: %s = %v, want %v", se.Data, k, data[k], v)
		}
	}
	if ra, _ := data["retryAfter"].(int); ra <= 0 {
		t.Fatalf("data %v: no retryAfter", se.Data)
	}
}

// TestSybilCannotGrowTheAgentQueue: distinct identities, each sending one
// free-text task (each within any per-requester share), cannot make the
// agent's queue hold more than the newcomers' share of it, half of
// agent.DefaultMaxQueued, while no job runs: the task past it is refused
// at once with 5003 scope "newcomers" and is not stored, instead of
// waiting "submitted" behind all the others; before, every task became a
// job and the queue grew without bound (and then, up to the whole
// queue, 5003 scope "node" for everyone).
func TestSybilCannotGrowTheAgentQueue(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	const sybils, share = 1_024 + 40, 1_024 / 2
	refused := 0
	for i := range sybils {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.trySend(k.Address(identity.Mainnet), fmt.Sprintf("sybil %d", i)); err != nil {
			wantRefusal(t, err, snap.CodeServiceUnavailable, map[string]any{"scope": "newcomers", "limit": share})
			refused++
		}
	}
	if got := r.queued(t); got > share {
		t.Fatalf("%d distinct identities queued %d jobs, want at most %d", sybils, got, share)
	}
	if refused != sybils-share {
		t.Fatalf("%d refused, want %d", refused, sybils-share)
	}
}

// limited gives r a queue bounded by limits, and a task service on it.
func (r *rig) limited(t *testing.T, limits agent.QueueLimits) {
	t.Helper()
	ts, err := sqlstore.New(context.Background(), r.db)
	if err != nil {
		t.Fatal(err)
	}
	r.queue = agent.NewLimitedQueue(r.store, nil, limits)
	r.svc = tasks.NewService(ts, tasks.ServiceOptions{Agent: r.queue})
}

// TestAgentQueueRequesterShare: one requester's queued jobs are bounded
// by its share (5002 scope "requester", the task not stored), which
// leaves room for others; an exempt requester (an operator) meets neither
// bound, and a job that ends gives its place back.
func TestAgentQueueRequesterShare(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 4, MaxQueuedPerRequester: 2, MaxNewcomers: 4,
		Exempt: func(who string) bool { return who == "operator" }})
	for i := range 2 {
		if err := r.trySend("bob", fmt.Sprintf("bob %d", i)); err != nil {
			t.Fatalf("bob's task %d within his share: %v", i, err)
		}
	}
	wantRefusal(t, r.trySend("bob", "bob 2"), snap.CodeRateLimitExceeded, map[string]any{"scope": "requester", "limit": 2})
	for i := range 2 {
		if err := r.trySend("alice", fmt.Sprintf("alice %d", i)); err != nil {
			t.Fatalf("alice's task %d: %v", i, err)
		}
	}
	wantRefusal(t, r.trySend("carol", "carol 0"), snap.CodeServiceUnavailable, map[string]any{"scope": "node", "limit": 4})
	ts, err := r.svc.List(context.Background(), tasks.Filter{Owner: "bob", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("bob has %d tasks, want 2: a refused task is not stored", len(ts))
	}
	// The job ends (as the runtime records a canceled task's job).
	j, err := r.store.Get(context.Background(), ts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	j.Status, j.Reason = agent.Canceled, "the task was canceled"
	if err := r.store.Write(context.Background(), agent.Save{Job: j, Expect: agent.Pending}); err != nil {
		t.Fatal(err)
	}
	if err := r.trySend("bob", "bob again"); err != nil {
		t.Fatalf("after one of bob's tasks ended: %v", err)
	}
	// The queue is full again; the operator is not held to it.
	for i := range 3 {
		if err := r.trySend("operator", fmt.Sprintf("operator %d", i)); err != nil {
			t.Fatalf("the operator's task %d: %v", i, err)
		}
	}
}

// TestAgentQueueBoundHeldUnderConcurrentSends: sends handled at once,
// each counting the queue before any of them stored its job, do not pass
// the bounds: one requester's 32 sends at once against a share of 2, and
// 32 requesters' sends at once against a queue of 4, queue at most 2 and
// 4 jobs. Before, each send counted the jobs stored and then stored its
// own, and sends in between all saw room.
func TestAgentQueueBoundHeldUnderConcurrentSends(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 4, MaxQueuedPerRequester: 2, MaxNewcomers: 4})
	burst := func(who func(i int) string) {
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				if err := r.trySend(who(i), fmt.Sprintf("task %d", i)); err != nil {
					var se *snap.Error
					if !errors.As(err, &se) {
						t.Errorf("send %d: %v, want a refusal", i, err)
					}
				}
			})
		}
		wg.Wait()
	}
	burst(func(int) string { return "bob" })
	if got := r.queued(t); got > 2 {
		t.Fatalf("one requester's 32 sends at once queued %d jobs, want at most its share, 2", got)
	}
	burst(func(i int) string { return fmt.Sprintf("peer %d", i) })
	if got := r.queued(t); got > 4 {
		t.Fatalf("32 requesters' sends at once queued %d jobs, want at most 4", got)
	}
}

// TestQueueAdmitMakesNoQuery: Admit decides from the queue's count in
// memory, not from the database: with the database closed once the
// queue has counted its jobs, the requester past its share is still
// refused 5002, the queue past its bound 5003, and the others admitted.
// Before, each Admit counted the stored jobs with a query, under a lock
// every free-text send took.
func TestQueueAdmitMakesNoQuery(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 4, MaxQueuedPerRequester: 2})
	for i := range 2 {
		if err := r.trySend("bob", fmt.Sprintf("bob %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := r.queue.Admit(ctx, "bob", known)
	wantRefusal(t, err, snap.CodeRateLimitExceeded, map[string]any{"scope": "requester", "limit": 2})
	for _, who := range []string{"alice", "carol"} {
		release, err := r.queue.Admit(ctx, who, known)
		if err != nil {
			t.Fatalf("%s with the database closed: %v", who, err)
		}
		defer release()
	}
	_, err = r.queue.Admit(ctx, "dave", known)
	wantRefusal(t, err, snap.CodeServiceUnavailable, map[string]any{"scope": "node", "limit": 4})
}

// wantCounted fails t unless the queue counts the jobs the store holds
// queued, all of them and each of whos.
func (r *rig) wantCounted(t *testing.T, step string, whos ...string) {
	t.Helper()
	stored, err := r.store.QueuedByRequester(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, n := range stored {
		sum += n
	}
	for _, who := range whos {
		if all, mine := r.queue.Queued(who); all != sum || mine != stored[who] {
			t.Fatalf("%s: the queue counts %d jobs, %d of %s's; the store holds %d, %d", step, all, mine, who, sum, stored[who])
		}
	}
}

// TestQueueCountFollowsJobs: the queue's count in memory follows each way
// a job enters or leaves the queue: sent, waiting for a human, back with
// a follow-up, worked on and ended by its runner, canceled, resumed from
// a checkpoint (DRAFT, then PENDING).
func TestQueueCountFollowsJobs(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 8, MaxQueuedPerRequester: 4})
	ctx := context.Background()
	var bobs []string
	for i := range 3 {
		if err := r.trySend("bob", fmt.Sprintf("bob %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.trySend("alice", "alice 0"); err != nil {
		t.Fatal(err)
	}
	ts, err := r.svc.List(ctx, tasks.Filter{Owner: "bob", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range ts {
		bobs = append(bobs, task.ID)
	}
	r.wantCounted(t, "sent", "bob", "alice")
	if all, mine := r.queue.Queued("bob"); all != 4 || mine != 3 {
		t.Fatalf("sent: %d queued, %d of bob's; want 4, 3", all, mine)
	}
	write := func(step, taskID string, from, to agent.Status, holder string) {
		t.Helper()
		j, err := r.store.Get(ctx, taskID)
		if err != nil {
			t.Fatal(err)
		}
		j.Status = to
		if err := r.store.Write(ctx, agent.Save{Job: j, Expect: from, Holder: holder}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		r.wantCounted(t, step, "bob", "alice")
	}
	write("waiting for a human", bobs[0], agent.Pending, agent.InterventionRequired, "")
	if _, err := r.store.AddInput(ctx, bobs[0], "go on", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	r.wantCounted(t, "a follow-up", "bob", "alice")
	if _, err := r.store.AddInput(ctx, bobs[0], "and on", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	r.wantCounted(t, "a follow-up to a queued job", "bob", "alice")
	ats, err := r.svc.List(ctx, tasks.Filter{Owner: "alice", Limit: 1})
	if err != nil || len(ats) != 1 {
		t.Fatal(ats, err)
	}
	if ok, err := r.store.Claim(ctx, ats[0].ID, "runner", time.Now(), time.Now().Add(time.Minute)); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	write("at work", ats[0].ID, "", agent.Running, "runner")
	write("ended by its runner", ats[0].ID, "", agent.Success, "runner")
	write("canceled", bobs[1], agent.Pending, agent.Canceled, "")
	write("waiting again", bobs[0], agent.Pending, agent.InterventionRequired, "")
	write("resuming", bobs[0], agent.InterventionRequired, agent.Draft, "")
	write("resumed", bobs[0], agent.Draft, agent.Pending, "")
	if all, mine := r.queue.Queued("bob"); all != 2 || mine != 2 {
		t.Fatalf("at the end: %d queued, %d of bob's; want 2, 2", all, mine)
	}
}

// TestQueueRecountCatchesUpWithReplicas: two replicas on one PostgreSQL
// database each count the jobs they queued; a replica admits past the
// bounds by what the other queued since its count, until Recount reads
// everyone's jobs again, and an admission pending across the recount
// stays counted.
func TestQueueRecountCatchesUpWithReplicas(t *testing.T) {
	dsn := testdb.Postgres(t)
	a, b := newRig(t, dsn), newRig(t, dsn)
	limits := agent.QueueLimits{MaxQueued: 4, MaxQueuedPerRequester: 2}
	a.limited(t, limits)
	b.limited(t, limits)
	ctx := context.Background()
	if err := a.queue.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.trySend("bob", fmt.Sprintf("bob %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	release, err := a.queue.Admit(ctx, "bob", known)
	if err != nil {
		t.Fatalf("before the recount, replica a has not seen bob's jobs: %v", err)
	}
	release()
	pending, err := a.queue.Admit(ctx, "alice", known)
	if err != nil {
		t.Fatal(err)
	}
	defer pending()
	if err := a.queue.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = a.queue.Admit(ctx, "bob", known)
	wantRefusal(t, err, snap.CodeRateLimitExceeded, map[string]any{"scope": "requester", "limit": 2})
	if _, err := a.queue.Admit(ctx, "carol", known); err != nil {
		t.Fatal(err) // bob's 2, alice's admission, carol's: 4
	}
	_, err = a.queue.Admit(ctx, "dave", known)
	wantRefusal(t, err, snap.CodeServiceUnavailable, map[string]any{"scope": "node", "limit": 4})
}

// history gives who a task the node has answered (canceled, its job
// ended), and no job queued: a peer with a history here.
func (r *rig) history(t *testing.T, who string) {
	t.Helper()
	ctx := context.Background()
	if err := r.trySend(who, who+"'s first task"); err != nil {
		t.Fatal(err)
	}
	ts, err := r.svc.List(ctx, tasks.Filter{Owner: who, Limit: 1})
	if err != nil || len(ts) != 1 {
		t.Fatal(ts, err)
	}
	if _, err := r.svc.Transition(ctx, ts[0].ID, tasks.StateCanceled, "canceled"); err != nil {
		t.Fatal(err)
	}
	j, err := r.store.Get(ctx, ts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	j.Status, j.Reason = agent.Canceled, "the task was canceled"
	if err := r.store.Write(ctx, agent.Save{Job: j, Expect: agent.Pending}); err != nil {
		t.Fatal(err)
	}
}

// TestAgentQueueNewcomersShare: fresh identities (no task the node has
// answered) fill at most the newcomers' share of the queue (half of it);
// past it a fresh identity's task is refused before it is stored, 5003
// {scope: "newcomers", limit}, and so is the second task of an identity
// whose only task waits in the queue, while a known peer still queues up
// to the full bound and an operator past it. Before, a flood of fresh
// identities filled the whole queue and every peer got 5003 until it
// drained.
func TestAgentQueueNewcomersShare(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 8, MaxQueuedPerRequester: 2,
		Exempt: func(who string) bool { return who == "operator" }})
	r.history(t, "alice")
	r.history(t, "bob")
	for i := range 4 {
		if err := r.trySend(fmt.Sprintf("fresh-%d", i), "flood"); err != nil {
			t.Fatalf("fresh identity %d within the newcomers' share: %v", i, err)
		}
	}
	wantRefusal(t, r.trySend("fresh-4", "flood"), snap.CodeServiceUnavailable, map[string]any{"scope": "newcomers", "limit": 4})
	wantRefusal(t, r.trySend("fresh-0", "again"), snap.CodeServiceUnavailable, map[string]any{"scope": "newcomers", "limit": 4})
	for i := range 2 {
		for _, who := range []string{"alice", "bob"} {
			if err := r.trySend(who, fmt.Sprintf("%s %d", who, i)); err != nil {
				t.Fatalf("known peer %s's task %d past the newcomers' share: %v", who, i, err)
			}
		}
	}
	if got := r.queued(t); got != 8 {
		t.Fatalf("%d jobs queued, want 8", got)
	}
	if n, err := r.svc.List(context.Background(), tasks.Filter{Owner: "fresh-4"}); err != nil || len(n) != 0 {
		t.Fatalf("the refused newcomer has %d tasks (%v), want none", len(n), err)
	}
	if err := r.trySend("operator", "past every bound"); err != nil {
		t.Fatalf("the operator: %v", err)
	}
}

// TestQueueNewcomersShareHeldUnderConcurrentAdmits: 64 fresh identities'
// and 64 known peers' admissions at once, none released, against a queue
// of 8 whose newcomers' share is 4: at most 4 fresh identities are
// admitted, the known peers take the rest, and no more than 8 in all.
// Whether a requester is known is asked only past the share, once per
// admission at most.
func TestQueueNewcomersShareHeldUnderConcurrentAdmits(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	r.limited(t, agent.QueueLimits{MaxQueued: 8, MaxQueuedPerRequester: 2})
	ctx := context.Background()
	if err := r.queue.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		wg                   sync.WaitGroup
		fresh, peers, lookup atomic.Int64
	)
	for i := range 128 {
		who, isKnown := fmt.Sprintf("fresh-%d", i), i%2 == 1
		if isKnown {
			who = fmt.Sprintf("peer-%d", i)
		}
		wg.Go(func() {
			release, err := r.queue.Admit(ctx, who, func() bool { lookup.Add(1); return isKnown })
			if err != nil {
				var se *snap.Error
				if !errors.As(err, &se) || se.Code != snap.CodeServiceUnavailable {
					t.Errorf("%s: %v, want a 5003", who, err)
				}
				return
			}
			t.Cleanup(release)
			if isKnown {
				peers.Add(1)
			} else {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if fresh.Load() > 4 || fresh.Load()+peers.Load() != 8 {
		t.Fatalf("admitted %d fresh identities and %d known peers, want at most 4 fresh and 8 in all", fresh.Load(), peers.Load())
	}
	if lookup.Load() > 128-fresh.Load() {
		t.Fatalf("%d lookups for 128 admissions, %d of them below the share", lookup.Load(), fresh.Load())
	}
}
