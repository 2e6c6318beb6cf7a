package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// takeAll is an agent that takes every task and leaves it working.
type takeAll struct{}

func (takeAll) Take(context.Context, *tasks.Task) error { return nil }

// owner is the requester of the tasks of the watch tests.
const owner = "bc1pwatchowner"

// Two processes' stores on one PostgreSQL database: a stream on the first
// gets the events written through the second, once each and in order,
// and the task's final event ends it.
func TestWatchOthersAcrossStores(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := tasks.NewService(open(t, dsn, Options{}), tasks.ServiceOptions{Agent: takeAll{}})
	storeB := open(t, dsn, Options{})
	b := tasks.NewService(storeB, tasks.ServiceOptions{Agent: takeAll{}})
	watched := open(t, dsn, Options{})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.WatchOthers(wctx, watched) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("WatchOthers: %v", err)
		}
	}()

	task := mustSendAs(t, a, owner, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
	if task.Status.State.Terminal() {
		t.Fatalf("task is %s", task.Status.State)
	}
	_, live, err := a.Subscribe(ctx, owner, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Written through the other process: the watch hears of it, whenever
	// it came in place, since it reads what it may have missed first.
	for _, id := range []string{"a1", "a2"} {
		if _, err := b.AddArtifact(ctx, task.ID, tasks.Artifact{ArtifactID: id, Parts: []tasks.Part{tasks.TextPart(id)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CancelTask(ctx, owner, &tasks.CancelParams{TaskID: task.ID}); err != nil {
		t.Fatal(err)
	}
	var got []string
	var last int64
	for ev := range live {
		if ev.Version <= last {
			t.Errorf("event of version %d after version %d", ev.Version, last)
		}
		last = ev.Version
		switch {
		case ev.Kind == tasks.EventArtifact:
			got = append(got, ev.Artifact.ArtifactID)
		case ev.Status != nil:
			got = append(got, string(ev.Status.State))
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("the stream did not end: got %v", got)
	}
	want := []string{"a1", "a2", "canceled"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("events %v; want %v", got, want)
	}
}

// A SQLite file has no other writer: Watch says it cannot watch, and
// WatchOthers returns that at once.
func TestWatchSQLiteUnsupported(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	if err := s.Watch(context.Background(), func(string) {}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Watch on SQLite: %v; want errors.ErrUnsupported", err)
	}
	svc := tasks.NewService(s, tasks.ServiceOptions{})
	if err := svc.WatchOthers(context.Background(), s); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WatchOthers on SQLite: %v; want errors.ErrUnsupported", err)
	}
}
