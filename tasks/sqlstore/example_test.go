package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlstore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// "postgres://user@host:5432/db?sslmode=…" would open PostgreSQL.
	store, err := sqlstore.Open(ctx, "sqlite:"+filepath.Join(dir, "snapnode.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	now := time.Now().UTC()
	task, err := store.Create(ctx, &tasks.Task{
		ID:        "task-1",
		ContextID: "ctx-1",
		Owner:     "bc1prequester",
		Status:    tasks.Status{State: tasks.StateSubmitted, Timestamp: now},
		History:   []tasks.Message{{MessageID: "m1", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("hello")}}},
		CreatedAt: now,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(task.Status.State, task.Version)

	// Optimistic concurrency: a change names the version it was based on.
	next := task.Clone()
	next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}
	task, err = store.Update(ctx, next, task.Version)
	fmt.Println(task.Status.State, task.Version, err)
	_, err = store.Update(ctx, next, 1)
	fmt.Println(errors.Is(err, tasks.ErrVersionConflict))

	// The state machine holds in the store: working → submitted is illegal.
	back := task.Clone()
	back.Status.State = tasks.StateSubmitted
	_, err = store.Update(ctx, back, task.Version)
	fmt.Println(errors.Is(err, tasks.ErrIllegalTransition))

	// The durable replay record: the first Remember of a pair is fresh.
	replay := store.ReplayStore()
	rec := snap.ReplayRecord{FirstSeen: now, Expires: now.Add(snap.MinReplayRetention)}
	_, fresh, _ := replay.Remember(ctx, "bc1prequester", "msg-1", rec)
	fmt.Println(fresh)
	_, fresh, _ = replay.Remember(ctx, "bc1prequester", "msg-1", rec)
	fmt.Println(fresh)
	// Output:
	// submitted 1
	// working 2 <nil>
	// true
	// true
	// true
	// false
}
