package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// openLimited opens the store of dsn bounded by lim, closed (with its
// database) when the test ends or by the returned function.
func openLimited(t *testing.T, dsn string, lim tasks.LiveLimits) (*Store, func()) {
	t.Helper()
	db, err := sqldb.Open(context.Background(), dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewLimited(context.Background(), db, lim)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	var once sync.Once
	closeAll := func() { once.Do(func() { s.Close(); db.Close() }) }
	t.Cleanup(closeAll)
	return s, closeAll
}

// wantRefused checks that err is ErrStoreFull carrying the *snap.Error
// code with the data want (among others).
func wantRefused(t *testing.T, what string, err error, code snap.Code, want map[string]any) {
	t.Helper()
	if !errors.Is(err, tasks.ErrStoreFull) {
		t.Fatalf("%s: %v, want ErrStoreFull", what, err)
	}
	se, ok := errors.AsType[*snap.Error](err)
	if !ok || se.Code != code {
		t.Fatalf("%s: %v, want a *snap.Error %d", what, err, code)
	}
	for k, v := range want {
		if fmt.Sprint(se.Data[k]) != fmt.Sprint(v) {
			t.Fatalf("%s: data %v, want %s = %v", what, se.Data, k, v)
		}
	}
}

// createMany creates n live tasks of owner, ids prefix-0 on, a few at a
// time (they share the group commits).
func createMany(t *testing.T, s *Store, owner, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := s.Create(context.Background(), task(fmt.Sprintf("%s-%d", prefix, i), owner)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestOneRequesterCannotFillTheSQLStore: on a real SQLite store, a
// requester's 1,001st live task is refused with 5002 naming the limit,
// another requester is still served, a task that ends (Update, Apply)
// gives its place back, and the count outlives a restart (the store
// counts the live tasks when it opens). Before, the SQL store took live
// tasks without bound: a peer's proposals, waiting for confirmation,
// grew with the disk.
func TestOneRequesterCannotFillTheSQLStore(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.SQLite(t)
	lim := tasks.LiveLimits{PerOwner: tasks.DefaultMaxLivePerOwner}
	s, closeStore := openLimited(t, dsn, lim)

	createMany(t, s, "bob", "bob", lim.PerOwner)
	refusal := map[string]any{"limit": lim.PerOwner, "scope": "requester", "retryAfter": tasks.LiveShareRetryAfter}
	_, err := s.Create(ctx, task("bob-over", "bob"))
	wantRefused(t, "bob's 1,001st live task", err, snap.CodeRateLimitExceeded, refusal)
	if _, err := s.Get(ctx, "bob-over"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("the refused task was stored: %v", err)
	}
	if _, err := s.Create(ctx, task("alice-0", "alice")); err != nil {
		t.Fatalf("alice is refused with bob's tasks: %v", err)
	}
	// A task created ended is not live: it takes no place.
	ended := task("bob-ended", "bob")
	ended.Status.State = tasks.StateCompleted
	if _, err := s.Create(ctx, ended); err != nil {
		t.Fatalf("an ended task of bob's: %v", err)
	}

	// A task canceled (Update) gives its place back.
	cur, err := s.Get(ctx, "bob-0")
	if err != nil {
		t.Fatal(err)
	}
	cur.Status = tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}
	if _, err := s.Update(ctx, cur, cur.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, task("bob-again", "bob")); err != nil {
		t.Fatalf("after one of bob's tasks ended: %v", err)
	}
	_, err = s.Create(ctx, task("bob-over2", "bob"))
	wantRefused(t, "bob's place taken again", err, snap.CodeRateLimitExceeded, refusal)

	// An outcome that ends a task (Apply) gives its place back.
	if _, _, err := s.Apply(ctx, "bob-1", tasks.Outcome{State: tasks.StateFailed, Note: "done", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// An outcome that leaves it live does not.
	if _, _, err := s.Apply(ctx, "bob-2", tasks.Outcome{State: tasks.StateInputRequired, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// A create of a taken id gives back the place it was counted in.
	if _, err := s.Create(ctx, task("bob-3", "bob")); !errors.Is(err, tasks.ErrExists) {
		t.Fatalf("a taken id: %v", err)
	}
	if _, err := s.Create(ctx, task("bob-after-apply", "bob")); err != nil {
		t.Fatalf("after one of bob's tasks failed: %v", err)
	}

	// The count outlives a restart.
	closeStore()
	s, _ = openLimited(t, dsn, lim)
	_, err = s.Create(ctx, task("bob-after-restart", "bob"))
	wantRefused(t, "bob after a restart", err, snap.CodeRateLimitExceeded, refusal)
	if _, err := s.Create(ctx, task("alice-1", "alice")); err != nil {
		t.Fatalf("alice after a restart: %v", err)
	}
}

// TestLiveTasksInAll: past LiveLimits.Total live tasks, all requesters
// together, a new live task is 5003 (the node's store is full), as a full
// MemoryStore answers; an ended task takes no place, and one that ends
// gives its place back.
func TestLiveTasksInAll(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, _ := openLimited(t, dsn, tasks.LiveLimits{PerOwner: 2, Total: 3})
		for _, id := range []string{"a1", "a2", "b1"} {
			if _, err := s.Create(ctx, task(id, id[:1])); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.Create(ctx, task("c1", "c"))
		wantRefused(t, "a 4th live task", err, snap.CodeServiceUnavailable, map[string]any{"reason": "the node holds as many live tasks as it may"})
		ended := task("c-ended", "c")
		ended.Status.State = tasks.StateCanceled
		if _, err := s.Create(ctx, ended); err != nil {
			t.Fatalf("an ended task: %v", err)
		}
		if _, _, err := s.Apply(ctx, "a1", tasks.Outcome{State: tasks.StateCompleted, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, task("c1", "c")); err != nil {
			t.Fatalf("after a task ended: %v", err)
		}
	})
}

// TestRecountLiveCatchesUpWithReplicas: two stores on one database (the
// replicas of a node on PostgreSQL) each count what they did; RecountLive
// brings in what the other did: the tasks it created, and those it ended
// of this one's.
func TestRecountLiveCatchesUpWithReplicas(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		lim := tasks.LiveLimits{PerOwner: 2}
		a, _ := openLimited(t, dsn, lim)
		b, _ := openLimited(t, dsn, lim)
		for _, id := range []string{"bob-1", "bob-2"} {
			if _, err := a.Create(ctx, task(id, "bob")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Create(ctx, task("bob-3", "bob")); !errors.Is(err, tasks.ErrStoreFull) {
			t.Fatalf("a: bob's 3rd: %v", err)
		}
		if err := b.RecountLive(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, task("bob-3", "bob")); !errors.Is(err, tasks.ErrStoreFull) {
			t.Fatalf("b, recounted: bob's 3rd: %v", err)
		}
		// b ends one of a's tasks; a learns of it when it recounts.
		if _, _, err := b.Apply(ctx, "bob-1", tasks.Outcome{State: tasks.StateFailed, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if n := a.live.Of("bob"); n != 2 {
			t.Fatalf("a counts %d of bob's live tasks before recounting, want 2", n)
		}
		if err := a.RecountLive(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Create(ctx, task("bob-3", "bob")); err != nil {
			t.Fatalf("a, recounted: %v", err)
		}
	})
}
