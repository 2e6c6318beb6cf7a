package sqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// A note is text the node writes (the agent's answer, a step's path),
// which may hold what a status message cannot (a NUL, which PostgreSQL's
// text refuses): the Service makes it a status message every store keeps,
// on every path that records one, so that the task ends on PostgreSQL as
// on SQLite.
func TestNotesAnyStoreKeeps(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		svc := tasks.NewService(s, tasks.ServiceOptions{Now: func() time.Time { return now }})
		const note, want = "done\x00 \xff", "done\uFFFD \uFFFD"
		for _, c := range []struct {
			name string
			end  func(id string) error
		}{
			{"Transition", func(id string) error {
				_, err := svc.Transition(ctx, id, tasks.StateCompleted, note)
				return err
			}},
			{"Progress", func(id string) error {
				_, err := svc.Progress(ctx, id, note)
				return err
			}},
			{"Settle.In", func(id string) error {
				st := svc.Settle(id)
				if err := s.DB().Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
					return st.In(ctx, tx, tasks.Outcome{State: tasks.StateCompleted, Note: note})
				}); err != nil {
					return err
				}
				_, err := st.Done(ctx, tasks.Outcome{})
				return err
			}},
			{"Settle.Done", func(id string) error {
				_, err := svc.Settle(id).Done(ctx, tasks.Outcome{State: tasks.StateCompleted, Note: note})
				return err
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := "n-" + c.name
				if _, err := s.Create(ctx, &tasks.Task{ID: id, Owner: "o", Status: tasks.Status{State: tasks.StateWorking, Timestamp: now}}); err != nil {
					t.Fatal(err)
				}
				if err := c.end(id); err != nil {
					t.Fatalf("note %q: %v", note, err)
				}
				got, err := s.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Message != want {
					t.Errorf("status message %q, want %q", got.Status.Message, want)
				}
			})
		}
	})
}
