package tasks

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// versionsOf is a Shared of unit tests over a MemoryStore, which the test
// writes without the Service as another process would; it counts its
// calls and fails those while failing is set.
type versionsOf struct {
	store   *MemoryStore
	calls   atomic.Int32
	failing atomic.Bool
}

func (v *versionsOf) Versions(ctx context.Context, ids []string) (map[string]int64, error) {
	v.calls.Add(1)
	if v.failing.Load() {
		return nil, errors.New("connection refused")
	}
	out := make(map[string]int64)
	for _, id := range ids {
		if t, err := v.store.Get(ctx, id); err == nil {
			out[id] = t.Version
		}
	}
	return out, nil
}

// Events another process wrote to the store reach a subscriber within an
// interval, each once and in order, none it had when it subscribed, and
// after a failed look at the next one; with no subscriber nothing is read.
func TestWatchOthersPublishesOthersEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
		shared := &versionsOf{store: store}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.WatchOthers(ctx, shared, time.Second, 0) }()

		task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		time.Sleep(3 * time.Second) // bubble time: three looks
		synctest.Wait()
		if n := shared.calls.Load(); n != 0 {
			t.Fatalf("%d reads of versions with no stream; want none", n)
		}
		// An artifact from before the subscription: the subscriber has it.
		cur, err := store.AppendArtifact(t.Context(), task.ID, task.Version, Artifact{ArtifactID: "before", Parts: []Part{TextPart("x")}})
		if err != nil {
			t.Fatal(err)
		}
		subCtx, unsubscribe := context.WithCancel(t.Context())
		_, live, err := svc.Subscribe(subCtx, alice, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		shared.failing.Store(true)
		for _, id := range []string{"a1", "a2"} {
			if cur, err = store.AppendArtifact(t.Context(), task.ID, cur.Version, Artifact{ArtifactID: id, Parts: []Part{TextPart(id)}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(live) != 0 || shared.calls.Load() == 0 {
			t.Fatalf("a failed look: %d events, %d looks", len(live), shared.calls.Load())
		}
		shared.failing.Store(false)
		time.Sleep(time.Second)
		synctest.Wait()
		var got []string
		for len(live) > 0 {
			got = append(got, (<-live).Artifact.ArtifactID)
		}
		if len(got) != 2 || got[0] != "a1" || got[1] != "a2" {
			t.Errorf("the subscriber got %v; want [a1 a2]", got)
		}
		// Looked at again: nothing new, nothing delivered twice.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if len(live) != 0 {
			t.Errorf("%d events delivered again", len(live))
		}
		unsubscribe()
		synctest.Wait()
		before := shared.calls.Load()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := shared.calls.Load(); n != before {
			t.Errorf("%d reads of versions after the stream ended; want none", n-before)
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("WatchOthers: %v", err)
		}
	})
}

// A task whose version moves without an event (a message in its history)
// has its events read once, not at every look.
func TestWatchOthersReadsAMovedTaskOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
		counting := &countingEvents{MemoryStore: store}
		svc.store = counting
		task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		_, _, err := svc.Subscribe(t.Context(), alice, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.AppendHistory(t.Context(), task.ID, task.Version, Message{MessageID: "m2", Role: "user", Parts: []Part{TextPart("more")}}); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		go svc.WatchOthers(ctx, &versionsOf{store: store}, time.Second, 0)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := counting.events.Load(); n != 1 {
			t.Errorf("the task's events were read %d times over five looks; want once", n)
		}
	})
}

// countingEvents counts the reads of events.
type countingEvents struct {
	*MemoryStore
	events atomic.Int32
}

func (c *countingEvents) Events(ctx context.Context, id string, after int64) ([]Event, error) {
	c.events.Add(1)
	return c.MemoryStore.Events(ctx, id, after)
}

// An event another process wrote, then one written through this Service
// before the watch's next look: the subscriber gets both, in order (the
// local publish must not take the subscription past the other's event).
func TestWatchOthersKeepsOthersEventBeforeALocalWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
		task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		_, live, err := svc.Subscribe(t.Context(), alice, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		go svc.WatchOthers(ctx, &versionsOf{store: store}, time.Second, 0)
		synctest.Wait() // the watch runs
		// Another process's artifact, then a local one, within one interval.
		if _, err := store.AppendArtifact(t.Context(), task.ID, task.Version, Artifact{ArtifactID: "other", Parts: []Part{TextPart("o")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.AddArtifact(t.Context(), task.ID, Artifact{ArtifactID: "local", Parts: []Part{TextPart("l")}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		var got []string
		for len(live) > 0 {
			got = append(got, (<-live).Artifact.ArtifactID)
		}
		if len(got) != 2 || got[0] != "other" || got[1] != "local" {
			t.Errorf("the subscriber got %v; want [other local]", got)
		}
	})
}

// slowApply is a MemoryStore whose Apply, once it has written, waits for
// release: a Runner's outcome recorded, and not yet published.
type slowApply struct {
	*MemoryStore
	applied, release chan struct{}
}

func (s *slowApply) Apply(ctx context.Context, id string, out Outcome) (*Task, []Event, error) {
	t, evs, err := s.MemoryStore.Apply(ctx, id, out)
	close(s.applied)
	<-s.release
	return t, evs, err
}

// A Runner's outcome is recorded outside the task's lock and published
// after: a cancellation written and published in between used to take
// the subscription past the outcome's event, which it then never got.
// One process, no watch: the cancellation publishes the event it follows
// first.
func TestOutcomeEventBeforeALaterWrite(t *testing.T) {
	svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
	slow := &slowApply{MemoryStore: store, applied: make(chan struct{}), release: make(chan struct{})}
	svc.store = slow
	task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
	_, live, err := svc.Subscribe(t.Context(), alice, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	resolved := make(chan error, 1)
	go func() {
		_, err := svc.Resolve(t.Context(), task.ID, Outcome{State: StateWorking, Note: "step one",
			Artifacts: []Artifact{{ArtifactID: "step", Parts: []Part{TextPart("x")}}}})
		resolved <- err
	}()
	<-slow.applied
	if _, err := svc.CancelTask(t.Context(), alice, &CancelParams{TaskID: task.ID}); err != nil {
		t.Fatal(err)
	}
	close(slow.release)
	if err := <-resolved; err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range live {
		if ev.Kind == EventArtifact {
			got = append(got, ev.Artifact.ArtifactID)
		} else {
			got = append(got, string(ev.Status.State))
		}
	}
	if len(got) == 0 || got[len(got)-1] != string(StateCanceled) || !slices.Contains(got, "step") {
		t.Errorf("the subscriber got %v; want the outcome's artifact, then the cancellation", got)
	}
}

// A subscription that takes what comes from now on (Broker.Subscribe,
// as the agent's job watches its task for a cancellation) costs the
// task's writes no read of its events: only streams, begun at a known
// version, are caught up.
func TestRawSubscriptionCostsNoRead(t *testing.T) {
	svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
	counting := &countingEvents{MemoryStore: store}
	svc.store = counting
	task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
	live := svc.Events().Subscribe(t.Context(), task.ID)
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := svc.AddArtifact(t.Context(), task.ID, Artifact{ArtifactID: id, Parts: []Part{TextPart(id)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := counting.events.Load(); n != 0 {
		t.Errorf("%d reads of the task's events for a subscriber of what comes; want none", n)
	}
	if len(live) != 3 {
		t.Errorf("the subscriber got %d events; want 3", len(live))
	}
}

// A stream follows a task that another process ends and the retention
// deletes before this one's watch looks (its final event never read
// here): at the next look the stream ends with 1001 naming the task,
// instead of sending heartbeats for it until StreamMaxDuration.
func TestWatchOthersEndsStreamOfDeletedTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}, StreamHeartbeat: 25 * time.Second})
		other := NewService(store, ServiceOptions{Agent: &stubAgent{}, Now: fixedClock()})
		task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		type result struct {
			task *Task
			err  error
		}
		done := make(chan result, 1)
		var events []any
		go func() {
			got, err := svc.StreamResubscribe(t.Context(), alice, &ResubscribeParams{TaskID: task.ID},
				func(ev any) error { events = append(events, ev); return nil })
			done <- result{got, err}
		}()
		synctest.Wait() // the stream follows the task
		if _, err := other.CancelTask(t.Context(), alice, &CancelParams{TaskID: task.ID}); err != nil {
			t.Fatal(err)
		}
		if n, err := (Retention{Store: store, TTL: time.Nanosecond, Now: func() time.Time { return fixedClock()().Add(time.Hour) }}).PruneOnce(t.Context()); err != nil || n != 1 {
			t.Fatalf("PruneOnce = %d, %v; want 1", n, err)
		}
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		go svc.WatchOthers(ctx, &versionsOf{store: store}, time.Second, 0)
		time.Sleep(2 * time.Second) // two looks
		synctest.Wait()
		select {
		case r := <-done:
			se, ok := errors.AsType[*snap.Error](r.err)
			if r.task != nil || !ok || se.Code != snap.CodeTaskNotFound || se.Data["taskId"] != task.ID {
				t.Errorf("the stream ended with %v, %v; want 1001 naming %s", r.task, r.err, task.ID)
			}
		default:
			t.Fatal("the stream of a deleted task still runs after two looks")
		}
		for _, ev := range events {
			if p, ok := ev.(*ProgressUpdate); !ok || p.Heartbeat || p.State != StateSubmitted {
				t.Errorf("event %+v; want the task as it was when the stream began", ev)
			}
		}
	})
}
