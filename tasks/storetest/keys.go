package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// keyKept asserts that err is the refusal of a key already kept with the
// task want.
func keyKept(t *testing.T, what string, err error, want string) {
	t.Helper()
	var kk *tasks.KeyKeptError
	if !errors.As(err, &kk) || !errors.Is(err, tasks.ErrKeyKept) || kk.TaskID != want {
		t.Fatalf("%s: err = %v, want the key kept with %s", what, err, want)
	}
}

// testAppendKeyed holds a store to AppendKeyed: the key kept with the
// message in one write, found before the append (whatever the version the
// caller read), per owner, and gone with its task.
func testAppendKeyed(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	at := base().Add(time.Minute)
	msg := func(id string) tasks.Message {
		return tasks.Message{MessageID: id, Role: tasks.RoleUser, Parts: []tasks.Part{text(id)}}
	}
	cur := mustCreate(t, s, sample("k1", "owner-a"))
	got, err := s.AppendKeyed(ctx, "k1", 1, "key-x", msg("m2"), at)
	if err != nil {
		t.Fatalf("AppendKeyed: %v", err)
	}
	want := cur.Clone()
	want.History = append(want.History, msg("m2"))
	want.Version = 2
	equal(t, "AppendKeyed result", got, want)
	equal(t, "Get after AppendKeyed", mustGet(t, s, "k1"), want)
	if evs, err := s.Events(ctx, "k1", 1); err != nil || len(evs) != 0 {
		t.Fatalf("events of a message appended: %v, %v; want none", evs, err)
	}

	// A retry, at the version it read before or after: nothing appended.
	_, err = s.AppendKeyed(ctx, "k1", 2, "key-x", msg("m2"), at)
	keyKept(t, "retry", err, "k1")
	_, err = s.AppendKeyed(ctx, "k1", 1, "key-x", msg("m2"), at)
	keyKept(t, "retry at the old version", err, "k1")
	// The owner's key on another of its tasks: refused, nothing appended.
	mustCreate(t, s, sample("k2", "owner-a"))
	_, err = s.AppendKeyed(ctx, "k2", 1, "key-x", msg("m2"), at)
	keyKept(t, "key of another task", err, "k1")
	equal(t, "after the retries", mustGet(t, s, "k1"), want)
	if g := mustGet(t, s, "k2"); g.Version != 1 || len(g.History) != 1 {
		t.Fatalf("k2 changed: version %d, %d messages", g.Version, len(g.History))
	}
	// Keys are per owner: another owner's key-x is its own.
	mustCreate(t, s, sample("k3", "owner-b"))
	if _, err := s.AppendKeyed(ctx, "k3", 1, "key-x", msg("b2"), at); err != nil {
		t.Fatalf("owner-b's key-x: %v", err)
	}
	if kf, ok := s.(tasks.KeyFinder); ok {
		for owner, id := range map[string]string{"owner-a": "k1", "owner-b": "k3"} {
			if g, err := kf.FindByIdempotencyKey(ctx, owner, "key-x"); err != nil || g.ID != id {
				t.Fatalf("FindByIdempotencyKey(%s, key-x) = %v, %v; want %s", owner, g, err, id)
			}
		}
	}

	// A refused append keeps no key: a version conflict, a terminal task,
	// a missing one.
	if _, err := s.AppendKeyed(ctx, "k1", 1, "key-y", msg("m3"), at); !errors.Is(err, tasks.ErrVersionConflict) {
		t.Fatalf("stale version: err = %v, want ErrVersionConflict", err)
	}
	done := mustCreate(t, s, sample("k4", "owner-a"))
	next := done.Clone()
	next.Status = tasks.Status{State: tasks.StateCanceled, Timestamp: base()}
	if _, err := s.Update(ctx, next, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendKeyed(ctx, "k4", 2, "key-z", msg("m3"), at); !errors.Is(err, tasks.ErrTerminal) {
		t.Fatalf("terminal task: err = %v, want ErrTerminal", err)
	}
	if _, err := s.AppendKeyed(ctx, "nope", 1, "key-w", msg("m3"), at); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("missing task: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AppendKeyed(ctx, "k1", 2, "", msg("m3"), at); !errors.Is(err, tasks.ErrInvalidTask) {
		t.Fatalf("empty key: err = %v, want ErrInvalidTask", err)
	}
	for i, key := range []string{"key-y", "key-z", "key-w"} {
		if _, err := s.AppendKeyed(ctx, "k2", int64(1+i), key, msg("n"+key), at); err != nil {
			t.Fatalf("%s after a refused append: %v", key, err)
		}
	}

	// A task waiting for input goes back to working, with its event.
	w := mustCreate(t, s, sample("k5", "owner-a"))
	for _, st := range []tasks.State{tasks.StateWorking, tasks.StateInputRequired} {
		next := w.Clone()
		next.Status = tasks.Status{State: st, Timestamp: base()}
		if w, err = s.Update(ctx, next, w.Version); err != nil {
			t.Fatal(err)
		}
	}
	got, err = s.AppendKeyed(ctx, "k5", w.Version, "key-v", msg("w2"), at)
	if err != nil {
		t.Fatalf("AppendKeyed to input_required: %v", err)
	}
	want = w.Clone()
	want.History = append(want.History, msg("w2"))
	want.Version++
	want.Status = tasks.Status{State: tasks.StateWorking, Timestamp: at}
	equal(t, "AppendKeyed to input_required", got, want)
	equal(t, "Get after AppendKeyed to input_required", mustGet(t, s, "k5"), want)
	evs, err := s.Events(ctx, "k5", w.Version)
	if err != nil || len(evs) != 1 || evs[0].Version != want.Version || evs[0].Kind != tasks.EventStatus ||
		evs[0].Status.State != tasks.StateWorking || !evs[0].Status.Timestamp.Equal(at) {
		t.Fatalf("events of the resumption: %s, %v", eventSummary(evs), err)
	}
	_, err = s.AppendKeyed(ctx, "k5", w.Version, "key-v", msg("w2"), at)
	keyKept(t, "retry to a resumed task", err, "k5")

	// The keys go with their task: once k1 is pruned, key-x is free.
	next = mustGet(t, s, "k1")
	next.Status = tasks.Status{State: tasks.StateCanceled, Timestamp: base()}
	if _, err := s.Update(ctx, next, next.Version); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, base().Add(time.Second), 100); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want k1 and k4", n, err)
	}
	if _, err := s.AppendKeyed(ctx, "k2", 4, "key-x", msg("m9"), at); err != nil {
		t.Fatalf("key-x of a pruned task: %v", err)
	}
}
