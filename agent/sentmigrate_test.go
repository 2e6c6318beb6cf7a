package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// A database at migration 0010 keeps each job's model record in
// model_sent: a canceled job's until its work elsewhere is canceled, a
// job that waits, is queued or runs its own. Migration 0011 moves the
// canceled jobs' records (and theirs alone) to model_sent_cancel: they are
// listed to cancel, and no step is given them; the others stay as they
// were, with whether their step was answered.
func TestMigrationMovesCanceledJobsRecords(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openTestDB(t, dsn)
		testdb.MigrateLikeOlderBuilds(t, db, migrations().FS, "agent_migrations", 10)
		old := &Store{db: db, d: db.Dialect} // the 0010 schema: no model_sent_cancel
		rows := []struct {
			id       Status
			sent     string
			answered int
		}{
			{Pending, "pending's task", 1},
			{Running, "running's step", 0},
			{InterventionRequired, "waiting's task", 1},
			{Canceled, "canceled's task", 1},
			{Canceled + "-unanswered", "canceled's step", 0},
			{Canceled + "-taken", "", 1},
			{Success, "", 1},
			{HaltedCost, "", 1},
		}
		for _, r := range rows {
			status := Status(string(r.id))
			if i := len(Canceled); len(r.id) > i && r.id[:i] == Canceled {
				status = Canceled
			}
			mustCreate(t, ctx, old, storeJob(string(r.id), status, storeT0))
			if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(`UPDATE agent_jobs SET model_sent = ?, model_sent_answered = ? WHERE task_id = ?`),
				r.sent, r.answered, string(r.id)); err != nil {
				t.Fatal(err)
			}
		}
		s, err := OpenStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := db.SchemaVersion(ctx, "agent"); err != nil || v < 11 {
			t.Fatalf("SchemaVersion = %d, %v; want at least 11", v, err)
		}
		list, err := s.CanceledSent(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range list {
			got = append(got, c.TaskID+": "+string(c.Sent))
		}
		if want := []string{"CANCELED: canceled's task", "CANCELED-unanswered: canceled's step"}; !slices.Equal(got, want) {
			t.Fatalf("CanceledSent after the migration = %q; want %q", got, want)
		}
		for _, r := range rows {
			_, _, k, _, err := s.StepInput(ctx, string(r.id))
			if err != nil {
				t.Fatal(err)
			}
			want := SentStep{Record: []byte(r.sent), Answered: r.answered != 0}
			if r.sent == "" || r.id[:min(len(r.id), len(Canceled))] == Canceled {
				want = SentStep{}
			}
			if string(k.Record) != string(want.Record) || k.Answered != want.Answered {
				t.Errorf("%s after the migration: a step is given %q (answered %v); want %q (answered %v)",
					r.id, k.Record, k.Answered, want.Record, want.Answered)
			}
		}
		// The moved records are taken once, as any.
		for _, c := range list {
			if n, err := s.TakeCanceledSent(ctx, c.TaskID, c.Sent, at(0), at(time.Minute)); err != nil || n != 1 {
				t.Fatalf("TakeCanceledSent(%s) = %v, %v", c.TaskID, n, err)
			}
			if ok, err := s.ForgetCanceledSent(ctx, c.TaskID, c.Sent); err != nil || !ok {
				t.Fatalf("ForgetCanceledSent(%s) = %v, %v", c.TaskID, ok, err)
			}
		}
		// A job at work when the node was upgraded ends canceled: its
		// record is given up to be canceled, as a new build's.
		j := mustGet(t, ctx, s, string(Running))
		if ok, err := s.Claim(ctx, j.TaskID, "h1", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		j = mustGet(t, ctx, s, string(Running))
		j.Status, j.Reason = Canceled, "the task was canceled"
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		if left, err := s.SentToCancel(ctx, j.TaskID); err != nil || len(left) != 1 || string(left[0].Sent) != "running's step" {
			t.Fatalf("SentToCancel(%s) = %+v, %v; want its record", j.TaskID, left, err)
		}
	})
}
