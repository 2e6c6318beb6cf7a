package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// A Forget cut short (the node killed, or a statement failing, between
// its transactions) leaves the job's history either as it was or
// forgotten whole, never read as tampered with: it deleted the live
// history a page at a time before the archive and the job's row, and a
// history cut so read as an archive the live history did not follow, or
// as missing its newest interactions. The next Forget finishes it.
func TestForgetCutShort(t *testing.T) {
	for _, cut := range []struct{ name, table, when string }{
		{"a page into the live history", "agent_interactions", "OLD.seq >= 220"},
		{"at the archive", "agent_history_segments", ""},
		{"a page into the recovery points", "agent_recovery_points", "OLD.seq >= 100"},
		{"at the job's row", "agent_jobs", "OLD.task_id <> ''"},
	} {
		t.Run(cut.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
				archivedJob(t, ctx, s, "j")
				before, err := s.History(ctx, "j")
				if err != nil {
					t.Fatal(err)
				}

				forgetCutShort(t, ctx, s, "j", cut.table, cut.when)

				switch h, err := s.History(ctx, "j"); {
				case errors.Is(err, ErrForgotten):
					t.Logf("cut short, the history reads as forgotten: %v", err)
				case err != nil:
					t.Fatalf("cut short, the history reads as: %v; want it as before or forgotten", err)
				case !reflect.DeepEqual(h, before):
					t.Fatalf("cut short, the history reads with %d interactions; want it as before (%d)", len(h.Interactions), len(before.Interactions))
				}
				for _, read := range []func() error{
					func() error { _, err := s.CheckHistory(ctx, "j"); return err },
					func() error {
						return s.StreamHistory(ctx, "j", func(*History) error { return nil }, func(*Interaction) error { return nil })
					},
				} {
					if err := read(); err != nil && !errors.Is(err, ErrForgotten) {
						t.Fatalf("cut short, the history streams as: %v; want it as before or forgotten", err)
					}
				}

				if ok, err := s.Forget(ctx, "j"); err != nil || !ok {
					t.Fatalf("Forget again = %v, %v; want it to finish what was cut short", ok, err)
				}
				if _, err := s.History(ctx, "j"); !errors.Is(err, ErrNoJob) {
					t.Fatalf("forgotten, the history reads as %v; want ErrNoJob", err)
				}
				for _, table := range []string{"agent_jobs", "agent_interactions", "agent_history_segments", "agent_recovery_points"} {
					var n int
					if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT count(*) FROM `+table+` WHERE task_id = ?`), "j").Scan(&n); err != nil || n != 0 {
						t.Errorf("forgotten, %s holds %d rows of the job (%v)", table, n, err)
					}
				}
			})
		})
	}
}

// A history read as its job is forgotten reads as forgotten, not as
// tampered with: the reading verified the history, then Forget deleted
// it from under the reading's next pass.
func TestHistoryReadAsItIsForgotten(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		archivedJob(t, ctx, s, "j")
		err := s.StreamHistory(ctx, "j", func(*History) error {
			forgetCutShort(t, ctx, s, "j", "agent_history_segments", "")
			return nil
		}, func(*Interaction) error { return nil })
		if !errors.Is(err, ErrForgotten) {
			t.Fatalf("StreamHistory = %v; want ErrForgotten", err)
		}
	})
}

// archivedJob creates the ended job of taskID with 250 interactions and
// recovery points, the first 120 interactions archived.
func archivedJob(t *testing.T, ctx context.Context, s *Store, taskID string) {
	t.Helper()
	j := storeJob(taskID, HaltedCost, at(0))
	mustCreate(t, ctx, s, j)
	for seq := range 250 {
		j.NextSeq = seq + 1
		if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(seq, "a step"),
			Recovery: &RecoveryPoint{CheckpointID: fmt.Sprintf("cp-%d", seq), Sequence: seq}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Archive(ctx, taskID, "", 120, false); err != nil {
		t.Fatal(err)
	}
}

// forgetCutShort forgets the job of taskID, stopped (stopForget) at the
// first row of table for which when holds.
func forgetCutShort(t *testing.T, ctx context.Context, s *Store, taskID, table, when string) {
	t.Helper()
	stopForget(t, ctx, s, table, when)
	if ok, err := s.Forget(ctx, taskID); err == nil {
		t.Fatalf("Forget = %v, nil; want the failure the test put in its way", ok)
	}
	drop := `DROP TRIGGER stopped`
	if s.d.Name() == "postgres" {
		drop += ` ON ` + table
	}
	execSQL(t, ctx, s, drop)
}

// stopForget has every statement that deletes a row of table for which
// when holds (any row when empty) fail, as a node killed there would
// stop: a trigger named stopped, on either dialect.
func stopForget(t *testing.T, ctx context.Context, s *Store, table, when string) {
	t.Helper()
	if when == "" {
		when = "1 = 1"
	}
	if s.d.Name() == "postgres" {
		execSQL(t, ctx, s, `CREATE OR REPLACE FUNCTION stopped() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the node stopped'; END $$`)
		execSQL(t, ctx, s, `CREATE TRIGGER stopped BEFORE DELETE ON `+table+` FOR EACH ROW WHEN (`+when+`) EXECUTE FUNCTION stopped()`)
		return
	}
	execSQL(t, ctx, s, `CREATE TRIGGER stopped BEFORE DELETE ON `+table+` WHEN `+when+` BEGIN SELECT RAISE(ABORT, 'the node stopped'); END`)
}

func execSQL(t *testing.T, ctx context.Context, s *Store, q string) {
	t.Helper()
	if _, err := s.db.W.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
