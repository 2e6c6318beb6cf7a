package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// canceledOf lists the records given up to be canceled and not
// forgotten, as "job: record", sorted.
func canceledOf(t *testing.T, ctx context.Context, s *Store) []string {
	t.Helper()
	list, err := s.CanceledSent(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range list {
		got = append(got, c.TaskID+": "+string(c.Sent))
	}
	slices.Sort(got)
	return got
}

// A job rewound while the cancel of its work elsewhere is still pending
// (taken, its peer down: the cancel failed, its take not lapsed), which
// then starts new work and ends, keeps both records to cancel: the end's
// write gives the new one up beside the old. Before, the job's one slot
// took the new record over the old: the old work was never canceled.
func TestRewoundThenEndedKeepsBothCancels(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("j", Pending, storeT0))
		claim := func(holder string, d time.Duration) *Job {
			t.Helper()
			if ok, err := s.Claim(ctx, "j", holder, at(d), at(d+time.Minute)); err != nil || !ok {
				t.Fatalf("Claim(%s) = %v, %v", holder, ok, err)
			}
			j := mustGet(t, ctx, s, "j")
			j.Status = Running
			if err := s.Write(ctx, Save{Job: j, Holder: holder}); err != nil {
				t.Fatal(err)
			}
			return j
		}
		j := claim("h1", 0)
		if err := s.KeepSent(ctx, "j", "h1", []byte("old work")); err != nil {
			t.Fatal(err)
		}
		// It waits for a human; an operator rewinds it.
		j.Status = InterventionRequired
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		j.Status = Pending
		if err := s.Write(ctx, Save{Job: j, Expect: InterventionRequired, Rewound: true}); err != nil {
			t.Fatal(err)
		}
		// A process takes the old record; its peer does not answer.
		if n, err := s.TakeCanceledSent(ctx, "j", []byte("old work"), at(time.Second), at(time.Hour)); err != nil || n != 1 {
			t.Fatalf("TakeCanceledSent = %v, %v", n, err)
		}
		// The job starts new work, and ends canceled.
		j = claim("h2", 2*time.Second)
		if err := s.KeepSent(ctx, "j", "h2", []byte("new work")); err != nil {
			t.Fatal(err)
		}
		j.Status, j.Reason = Canceled, "the task was canceled"
		if err := s.Write(ctx, Save{Job: j, Holder: "h2", Release: true}); err != nil {
			t.Fatal(err)
		}
		if got, want := canceledOf(t, ctx, s), []string{"j: new work", "j: old work"}; !slices.Equal(got, want) {
			t.Fatalf("records to cancel = %q; want %q", got, want)
		}
		// The old one, still taken, is not listed to take; the new is.
		list, err := s.CanceledSentUntaken(ctx, at(3*time.Second), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || string(list[0].Sent) != "new work" {
			t.Errorf("CanceledSentUntaken = %+v; want the new record alone", list)
		}
	})
}

// A database at migration 0012 keeps each job's record to cancel in its
// row (model_sent_cancel, with its take and tries). Migration 0013 moves
// each to a row of agent_sent_cancels, taken as it was: a record taken
// stays held until its take lapses, and its tries go on counting.
func TestMigrationMovesRecordsToCancelToRows(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openTestDB(t, dsn)
		testdb.MigrateLikeOlderBuilds(t, db, migrations().FS, "agent_migrations", 12)
		old := &Store{db: db, d: db.Dialect} // the 0012 schema
		for _, r := range []struct {
			id, sent     string
			until, tries int64
		}{
			{"free", "free's work", 0, 0},
			{"taken", "taken's work", sqldb.Micros(at(time.Hour)), 2},
			{"none", "", 0, 0},
		} {
			mustCreate(t, ctx, old, storeJob(r.id, Canceled, storeT0))
			if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(`UPDATE agent_jobs
				SET model_sent_cancel = ?, model_sent_cancel_until = ?, model_sent_cancel_tries = ? WHERE task_id = ?`),
				r.sent, r.until, r.tries, r.id); err != nil {
				t.Fatal(err)
			}
		}
		s, err := OpenStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := canceledOf(t, ctx, s), []string{"free: free's work", "taken: taken's work"}; !slices.Equal(got, want) {
			t.Fatalf("records to cancel after the migration = %q; want %q", got, want)
		}
		list, err := s.CanceledSentUntaken(ctx, at(0), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].TaskID != "free" {
			t.Errorf("CanceledSentUntaken = %+v; want free's alone: taken's take holds", list)
		}
		if n, err := s.TakeCanceledSent(ctx, "taken", []byte("taken's work"), at(0), at(time.Minute)); err != nil || n != 0 {
			t.Errorf("TakeCanceledSent(taken) while its take holds = %v, %v; want 0", n, err)
		}
		if n, err := s.TakeCanceledSent(ctx, "taken", []byte("taken's work"), at(2*time.Hour), at(3*time.Hour)); err != nil || n != 3 {
			t.Errorf("TakeCanceledSent(taken) once lapsed = %v, %v; want its third try", n, err)
		}
		if _, err := db.R.ExecContext(ctx, `SELECT model_sent_cancel FROM agent_jobs`); err == nil {
			t.Error("agent_jobs still has model_sent_cancel; want the column gone")
		}
	})
}

// A job's records to cancel are bounded: past MaxCancelsPerJob the oldest
// go, and no other job's; a record given up twice is kept once; a write
// of another holder gives nothing up; forgetting the job forgets them.
func TestRecordsToCancelBoundedPerJob(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("j", Pending, storeT0), storeJob("other", Pending, storeT0))
		for _, id := range []string{"j", "other"} {
			if ok, err := s.Claim(ctx, id, "h1", at(0), at(time.Hour)); err != nil || !ok {
				t.Fatalf("Claim(%s) = %v, %v", id, ok, err)
			}
		}
		if err := s.KeepSentCanceling(ctx, "other", "h1", []byte("other's next"), []byte("other's work")); err != nil {
			t.Fatal(err)
		}
		extra := 3
		for i := range MaxCancelsPerJob + extra {
			if err := s.KeepSentCanceling(ctx, "j", "h1", []byte(fmt.Sprint("next ", i)), []byte(fmt.Sprint("work ", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.KeepSentCanceling(ctx, "j", "h1", []byte("next again"), []byte(fmt.Sprint("work ", MaxCancelsPerJob+extra-1))); err != nil {
			t.Fatal(err)
		}
		if err := s.KeepSentCanceling(ctx, "j", "h2", []byte("not h2's"), []byte("h2's work")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("KeepSentCanceling of another holder = %v; want ErrLeaseLost", err)
		}
		left, err := s.SentToCancel(ctx, "j")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := extra; i < MaxCancelsPerJob+extra; i++ {
			want = append(want, fmt.Sprint("work ", i))
		}
		var got []string
		for _, c := range left {
			got = append(got, string(c.Sent))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("j's records to cancel = %q; want the newest %d: %q", got, MaxCancelsPerJob, want)
		}
		if k := sentStep(t, s, "j"); string(k.Record) != "next again" {
			t.Errorf("j's step is given %q; want its last record", k.Record)
		}
		if left, err := s.SentToCancel(ctx, "other"); err != nil || len(left) != 1 {
			t.Errorf("other's records to cancel = %+v, %v; want its one", left, err)
		}
		// Ended and forgotten, the job's records go with it.
		j := mustGet(t, ctx, s, "j")
		j.Status = Canceled
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Forget(ctx, "j"); err != nil || !ok {
			t.Fatalf("Forget = %v, %v", ok, err)
		}
		if left, err := s.SentToCancel(ctx, "j"); err != nil || len(left) != 0 {
			t.Errorf("a forgotten job's records to cancel = %+v, %v; want none", left, err)
		}
	})
}
