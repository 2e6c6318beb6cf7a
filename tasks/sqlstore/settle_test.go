package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// An outcome settled inside another component's transaction is durable
// exactly when that transaction commits, and its events reach subscribers
// only after the commit (Done), never for a transaction rolled back.
func TestSettlementInTransaction(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		svc := tasks.NewService(s, tasks.ServiceOptions{Now: func() time.Time { return now }})
		for _, id := range []string{"t1", "t2"} {
			if _, err := s.Create(ctx, &tasks.Task{ID: id, Owner: "o", Status: tasks.Status{State: tasks.StateSubmitted, Timestamp: now}}); err != nil {
				t.Fatal(err)
			}
		}
		sub, cancel := context.WithCancel(ctx)
		defer cancel()
		events := svc.Events().Subscribe(sub, "t1")
		out := tasks.Outcome{State: tasks.StateCompleted, Note: "written",
			Artifacts: []tasks.Artifact{{ArtifactID: "result", Parts: []tasks.Part{tasks.TextPart("ok")}}}}

		// The producer's transaction fails after In: nothing stays.
		errProducer := errors.New("the producer's own write failed")
		st := svc.Settle("t1")
		err := s.DB().Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := st.In(ctx, tx, out); err != nil {
				return err
			}
			return errProducer
		})
		if !errors.Is(err, errProducer) {
			t.Fatalf("Write = %v", err)
		}
		if got, _ := s.Get(ctx, "t1"); got.Version != 1 || got.Status.State != tasks.StateSubmitted || len(got.Artifacts) != 0 {
			t.Fatalf("rolled back outcome left v%d %s, %d artifacts", got.Version, got.Status.State, len(got.Artifacts))
		}
		if evs, _ := s.Events(ctx, "t1", 1); len(evs) != 0 || len(events) != 0 {
			t.Fatalf("rolled back outcome left %d stored and %d published events", len(evs), len(events))
		}

		// Committed: durable with the producer's write, published by Done.
		st = svc.Settle("t1")
		err = s.DB().Write(ctx, func(ctx context.Context, tx *sql.Tx) error { return st.In(ctx, tx, out) })
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 0 {
			t.Fatal("events published before Done")
		}
		done, err := st.Done(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := s.Get(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if done.Version != 4 || stored.Version != 4 || stored.Status.State != tasks.StateCompleted ||
			stored.Status.Message != "written" || !stored.Status.Timestamp.Equal(now) || len(stored.Artifacts) != 1 {
			t.Fatalf("settled task: Done v%d, stored v%d %+v", done.Version, stored.Version, stored.Status)
		}
		var got []string
		for ev := range events {
			got = append(got, string(ev.Kind))
		}
		if want := "status artifact status"; strings.Join(got, " ") != want {
			t.Fatalf("published %q, want %q", strings.Join(got, " "), want)
		}

		// In never ran: Done applies the outcome itself.
		t2, err := svc.Settle("t2").Done(ctx, tasks.Outcome{State: tasks.StateFailed, Note: "refused"})
		if err != nil {
			t.Fatal(err)
		}
		if t2.Status.State != tasks.StateFailed || t2.Version != 3 {
			t.Fatalf("Done without In: %s v%d", t2.Status.State, t2.Version)
		}

		// The task was canceled while the producer worked: In refuses
		// without failing the producer's commit, and Done says why.
		if _, err := s.Create(ctx, &tasks.Task{ID: "t3", Owner: "o", Status: tasks.Status{State: tasks.StateCanceled, Timestamp: now}}); err != nil {
			t.Fatal(err)
		}
		st = svc.Settle("t3")
		if err := s.DB().Write(ctx, func(ctx context.Context, tx *sql.Tx) error { return st.In(ctx, tx, out) }); err != nil {
			t.Fatalf("a refused outcome failed the producer's commit: %v", err)
		}
		if _, err := st.Done(ctx, out); !errors.Is(err, tasks.ErrTerminal) {
			t.Fatalf("Done of a refused outcome = %v, want ErrTerminal", err)
		}
	})
}
