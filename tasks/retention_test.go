package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// Retention deletes tasks a TTL after they end, in rounds, and keeps live
// ones; TTL 0 keeps everything.
func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		store := tasks.NewMemoryStore(tasks.MemoryStoreOptions{})
		start := time.Now()
		end := func(id string, at time.Time) {
			cur, err := store.Create(ctx, &tasks.Task{ID: id, Owner: "o", Status: tasks.Status{State: tasks.StateSubmitted, Timestamp: start},
				History: []tasks.Message{{MessageID: "m", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("x")}}}, CreatedAt: start})
			if err != nil {
				t.Fatal(err)
			}
			next := cur.Clone()
			next.Status = tasks.Status{State: tasks.StateCanceled, Timestamp: at}
			if _, err := store.Update(ctx, next, cur.Version); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2500 { // more than one Prune batch
			end(fmt.Sprintf("early-%d", i), start)
		}
		end("late", start.Add(90*time.Minute))
		if _, err := store.Create(ctx, &tasks.Task{ID: "live", Owner: "o", Status: tasks.Status{State: tasks.StateSubmitted, Timestamp: start},
			History: []tasks.Message{{MessageID: "m", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("x")}}}, CreatedAt: start}); err != nil {
			t.Fatal(err)
		}

		if n, err := (tasks.Retention{Store: store}).PruneOnce(ctx); n != 0 || err != nil {
			t.Fatalf("TTL 0 pruned %d, %v", n, err)
		}
		rounds := make(chan int, 10)
		go (tasks.Retention{Store: store, TTL: time.Hour}).Run(ctx, 30*time.Minute, 0, func(n int, err error) {
			if err != nil {
				t.Error(err)
			}
			rounds <- n
		})
		if n := <-rounds; n != 0 { // at start: nothing is an hour old
			t.Fatalf("first round pruned %d", n)
		}
		drain := func() (sum int) {
			synctest.Wait()
			for len(rounds) > 0 {
				sum += <-rounds
			}
			return sum
		}
		time.Sleep(60 * time.Minute) // ticks at 30 and 60 min: nothing is older than an hour
		if got := drain(); got != 0 {
			t.Fatalf("pruned %d within the hour", got)
		}
		time.Sleep(30 * time.Minute) // 90 min: the early tasks are past it
		if got := drain(); got != 2500 {
			t.Fatalf("pruned %d, want 2500", got)
		}
		if store.Len() != 2 {
			t.Fatalf("%d tasks left, want late and live", store.Len())
		}
		time.Sleep(90 * time.Minute) // late ended at 90 min: gone by the tick at 180
		if got := drain(); got != 1 {
			t.Fatalf("pruned %d, want late", got)
		}
		if _, err := store.Get(ctx, "late"); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("late: %v", err)
		}
		if _, err := store.Get(ctx, "live"); err != nil {
			t.Fatalf("a live task was pruned: %v", err)
		}
		cancel()
	})
}
