package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) tasks.Store { return tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 1000}) })
}

func newTask(id string, st tasks.State) *tasks.Task {
	return &tasks.Task{
		ID:        id,
		Owner:     "bc1powner",
		Status:    tasks.Status{State: st, Timestamp: time.Unix(1770163200, 0).UTC()},
		History:   []tasks.Message{{MessageID: "m", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("x")}}},
		CreatedAt: time.Unix(1770163200, 0).UTC(),
	}
}

func TestMemoryStoreFull(t *testing.T) {
	ctx := context.Background()
	s := tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 3})
	for i := range 3 {
		if _, err := s.Create(ctx, newTask(fmt.Sprintf("live%d", i), tasks.StateSubmitted)); err != nil {
			t.Fatal(err)
		}
	}
	// Full of live tasks: refuse, 5003, and keep every live task.
	_, err := s.Create(ctx, newTask("new", tasks.StateSubmitted))
	var se *snap.Error
	if !errors.Is(err, tasks.ErrStoreFull) || !errors.As(err, &se) || se.Code != snap.CodeServiceUnavailable {
		t.Fatalf("full store: err = %v, want ErrStoreFull and a 5003 *snap.Error", err)
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}

	// Terminal tasks are evicted in the order they became terminal.
	finish := func(id string, to tasks.State) {
		t.Helper()
		cur, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next := cur.Clone()
		next.Status.State = to
		if _, err := s.Update(ctx, next, cur.Version); err != nil {
			t.Fatal(err)
		}
	}
	finish("live2", tasks.StateCanceled) // first to end
	finish("live0", tasks.StateFailed)   // second
	if _, err := s.Create(ctx, newTask("new1", tasks.StateSubmitted)); err != nil {
		t.Fatalf("Create with a terminal task to evict: %v", err)
	}
	if _, err := s.Get(ctx, "live2"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("live2 (terminal first) not evicted: %v", err)
	}
	if _, err := s.Create(ctx, newTask("new2", tasks.StateSubmitted)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "live0"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("live0 not evicted: %v", err)
	}
	for _, id := range []string{"live1", "new1", "new2"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("live task %s lost: %v", id, err)
		}
	}
	if _, err := s.Create(ctx, newTask("new3", tasks.StateSubmitted)); !errors.Is(err, tasks.ErrStoreFull) {
		t.Fatalf("full again: err = %v", err)
	}
}

func TestMemoryStoreEvictionChurn(t *testing.T) {
	// Many more tasks than room, each finishing at once: the store stays
	// at its bound and keeps the newest.
	ctx := context.Background()
	s := tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 10})
	for i := range 1000 {
		id := fmt.Sprintf("t%d", i)
		if _, err := s.Create(ctx, newTask(id, tasks.StateCompleted)); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if s.Len() > 10 {
			t.Fatalf("Len = %d > 10", s.Len())
		}
	}
	for i := 990; i < 1000; i++ {
		if _, err := s.Get(ctx, fmt.Sprintf("t%d", i)); err != nil {
			t.Fatalf("newest task t%d evicted: %v", i, err)
		}
	}
}

// Prune deletes terminal tasks but leaves their ids in the eviction
// queue; an id pruned and then taken again by a new, live task must not
// make a full store evict that task.
func TestMemoryStorePruneThenFull(t *testing.T) {
	ctx := context.Background()
	s := tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 2})
	if _, err := s.Create(ctx, newTask("a", tasks.StateCompleted)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, time.Unix(1770163200, 0).Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	for _, id := range []string{"a", "b"} { // a again, live this time
		if _, err := s.Create(ctx, newTask(id, tasks.StateSubmitted)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, newTask("c", tasks.StateSubmitted)); !errors.Is(err, tasks.ErrStoreFull) {
		t.Errorf("full of live tasks: err = %v, want ErrStoreFull", err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("live task %s lost: %v", id, err)
		}
	}
}

func TestNewMemoryStoreDefault(t *testing.T) {
	s := tasks.NewMemoryStore(tasks.MemoryStoreOptions{})
	for i := range 100 {
		if _, err := s.Create(context.Background(), newTask(fmt.Sprintf("t%d", i), tasks.StateSubmitted)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 100 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// prunedBetween is a store whose task the retention deletes between the
// service's read of it and its read of the task's events.
type prunedBetween struct{ *tasks.MemoryStore }

func (prunedBetween) Events(context.Context, string, int64) ([]tasks.Event, error) {
	return nil, tasks.ErrNotFound
}

func (prunedBetween) EventsPage(context.Context, string, int64, int, int) ([]tasks.Event, error) {
	return nil, tasks.ErrNotFound
}

// A task deleted between the two reads of a resubscription (or of its
// events) is 1001 to the requester, as one deleted before: before, the
// second read's ErrNotFound answered 5001.
func TestTaskDeletedMidReadIsNotFound(t *testing.T) {
	ctx := context.Background()
	store := prunedBetween{tasks.NewMemoryStore(tasks.MemoryStoreOptions{})}
	if _, err := store.Create(ctx, newTask("t1", tasks.StateWorking)); err != nil {
		t.Fatal(err)
	}
	svc := tasks.NewService(store, tasks.ServiceOptions{})
	_, _, _, err := svc.Resubscribe(ctx, "bc1powner", "t1", 0)
	if snap.CodeOf(err) != snap.CodeTaskNotFound {
		t.Errorf("resubscribe: %v, want 1001", err)
	}
	if _, err := svc.TaskEvents(ctx, "bc1powner", "t1", 0); snap.CodeOf(err) != snap.CodeTaskNotFound {
		t.Errorf("task events: %v, want 1001", err)
	}
}
