package agent

import (
	"context"
	"slices"
	"testing"
	"time"
)

// canceledOf lists the records of job id given up to be canceled and not
// forgotten, as "job: record".
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
