package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
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
	go func() { done <- a.WatchOthers(wctx, watched, 10*time.Millisecond, 0) }()
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
	// Written through the other process: the watch finds the task's
	// version moved and reads its new events.
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

// Versions gives the current version of each task named that exists.
func TestVersions(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, Options{})
		svc := tasks.NewService(s, tasks.ServiceOptions{Agent: takeAll{}})
		one := mustSendAs(t, svc, owner, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"one"}]}}`)
		two := mustSendAs(t, svc, owner, `{"message":{"messageId":"m2","role":"user","parts":[{"text":"two"}]}}`)
		two, err := svc.AddArtifact(context.Background(), two.ID, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{tasks.TextPart("x")}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Versions(context.Background(), []string{one.ID, two.ID, "missing"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[one.ID] != one.Version || got[two.ID] != two.Version {
			t.Errorf("Versions = %v; want %s:%d and %s:%d", got, one.ID, one.Version, two.ID, two.Version)
		}
		if got, err := s.Versions(context.Background(), nil); err != nil || len(got) != 0 {
			t.Errorf("Versions of none = %v, %v", got, err)
		}
	})
}

// A stream on one process follows a task that the other ends and its
// retention deletes before the first process's watch looks: the watch
// finds the task gone and the stream ends with 1001 naming it, not at
// StreamMaxDuration.
func TestWatchOthersEndsStreamOfDeletedTask(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := tasks.NewService(open(t, dsn, Options{}), tasks.ServiceOptions{Agent: takeAll{}})
	storeB := open(t, dsn, Options{})
	b := tasks.NewService(storeB, tasks.ServiceOptions{Agent: takeAll{}})
	task := mustSendAs(t, a, owner, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)

	type result struct {
		task *tasks.Task
		err  error
	}
	done := make(chan result, 1)
	following := make(chan struct{})
	go func() {
		got, err := a.StreamResubscribe(ctx, owner, &tasks.ResubscribeParams{TaskID: task.ID}, func(ev any) error {
			if p, ok := ev.(*tasks.ProgressUpdate); ok && p.Current {
				close(following)
			}
			return nil
		})
		done <- result{got, err}
	}()
	<-following
	if _, err := b.CancelTask(ctx, owner, &tasks.CancelParams{TaskID: task.ID}); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	if n, err := (tasks.Retention{Store: storeB, TTL: time.Minute, Now: later}).PruneOnce(ctx); err != nil || n != 1 {
		t.Fatalf("PruneOnce = %d, %v; want 1", n, err)
	}
	// The first process's watch begins after: it never reads the final
	// event.
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- a.WatchOthers(wctx, open(t, dsn, Options{}), 10*time.Millisecond, 0) }()
	defer func() {
		stop()
		if err := <-watched; err != nil {
			t.Errorf("WatchOthers: %v", err)
		}
	}()
	r := <-done
	if ctx.Err() != nil {
		t.Fatal("the stream of the deleted task ran until the test's deadline")
	}
	se, ok := errors.AsType[*snap.Error](r.err)
	if r.task != nil || !ok || se.Code != snap.CodeTaskNotFound {
		t.Errorf("the stream ended with %v, %v; want 1001", r.task, r.err)
	}
}
