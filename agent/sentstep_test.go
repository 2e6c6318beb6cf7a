package agent

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// sentStep is what the job of id gives its next step of its model's
// record (Store.StepInput).
func sentStep(t *testing.T, s *Store, id string) SentStep {
	t.Helper()
	_, _, k, _, err := s.StepInput(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// What a model keeps of a step it sent (a delegate's idempotency key and
// its task on another agent) stays in the job's row while the step is
// tried again: across a failed call recorded and the lease given up (the
// node stopped), so the node that claims the job next gets it back, not
// answered. The holder alone writes it. The write that records the
// model's answer, and one that makes the job wait for a human, keep it,
// marked answered: the job's next step continues the task it names, and
// does not send the step again. A job that succeeds forgets it; one
// canceled gives it up to be listed (CanceledSent) until one process
// takes it (TakeCanceledSent) to cancel the model's work elsewhere.
func TestStoreKeepsSentStep(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		want := func(t *testing.T, id, when, record string, answered bool) {
			t.Helper()
			if got := sentStep(t, s, id); string(got.Record) != record || got.Answered != answered || (record == "") != (got.Record == nil) {
				t.Fatalf("%s, the sent step = %q, answered %v; want %q, answered %v", when, got.Record, got.Answered, record, answered)
			}
		}
		j := storeJob("j", Pending, storeT0)
		mustCreate(t, ctx, s, j)
		if ok, err := s.Claim(ctx, "j", "h1", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		j.Status = Running
		if err := s.Write(ctx, Save{Job: j, Holder: "h1"}); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "a new job's", "", false)
		if err := s.KeepSent(ctx, "j", "h2", []byte(`{"key":"other"}`)); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("KeepSent by another holder = %v; want ErrLeaseLost", err)
		}
		const step = `{"key":"k1","message_id":"m1"}`
		if err := s.KeepSent(ctx, "j", "h1", []byte(step)); err != nil {
			t.Fatal(err)
		}
		failed := storeInteraction(0, "")
		failed.Response = Response{Status: ResponseError, Kind: KindAPIError, Error: "the exchange failed", NewStatus: Running}
		failed.Observation = nil
		j.NextSeq = 1
		if err := s.Write(ctx, Save{Job: j, Interaction: failed, Holder: "h1"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, "j", "h1"); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "after a failed call and a stop", step, false)
		if ok, err := s.Claim(ctx, "j", "h2", at(time.Second), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		j.NextSeq = 2
		if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(1, "read"), Holder: "h2"}); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "after the answer was recorded", step, true)
		const next = `{"task":"t1","key":"k2","message_id":"m2"}`
		if err := s.KeepSent(ctx, "j", "h2", []byte(next)); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "once the next step is recorded", next, false)
		j.Status, j.Reason = InterventionRequired, "the delegate did not answer"
		if err := s.Write(ctx, Save{Job: j, Holder: "h2", Unsettled: true}); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "once the job waits for a human", next, true)

		// Canceled: kept, and listed until taken, once.
		j.Status, j.Reason = Canceled, "the task was canceled"
		if err := s.Write(ctx, Save{Job: j}); err != nil {
			t.Fatal(err)
		}
		want(t, "j", "once the job is canceled (its record is to cancel, no step's)", "", false)
		ended := storeJob("done", Running, storeT0)
		mustCreate(t, ctx, s, ended)
		if ok, err := s.Claim(ctx, "done", "h1", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if err := s.KeepSent(ctx, "done", "h1", []byte(step)); err != nil {
			t.Fatal(err)
		}
		ended.Status = Success
		if err := s.Write(ctx, Save{Job: ended, Holder: "h1"}); err != nil {
			t.Fatal(err)
		}
		want(t, "done", "once the job succeeded", "", false)
		list, err := s.CanceledSent(ctx, 10)
		if err != nil || len(list) != 1 || list[0].TaskID != "j" || string(list[0].Sent) != next {
			t.Fatalf("CanceledSent = %+v, %v; want j's record", list, err)
		}
		if n, err := s.TakeCanceledSent(ctx, "j", []byte(step), at(0), at(time.Minute)); err != nil || n != 0 {
			t.Fatalf("TakeCanceledSent of another record = %v, %v; want 0", n, err)
		}
		if n, err := s.TakeCanceledSent(ctx, "j", list[0].Sent, at(0), at(time.Minute)); err != nil || n != 1 {
			t.Fatalf("TakeCanceledSent = %v, %v; want 1", n, err)
		}
		if n, err := s.TakeCanceledSent(ctx, "j", list[0].Sent, at(time.Second), at(2*time.Minute)); err != nil || n != 0 {
			t.Fatalf("TakeCanceledSent again = %v, %v; want 0: taken, until a minute", n, err)
		}
		// Taken, it stays listed until forgotten: a take that lapsed
		// (its process crashed before the cancel was answered) is taken
		// again.
		if list, err := s.CanceledSent(ctx, 10); err != nil || len(list) != 1 {
			t.Fatalf("CanceledSent = %+v, %v; want j's record, taken", list, err)
		}
		if n, err := s.TakeCanceledSent(ctx, "j", list[0].Sent, at(2*time.Minute), at(3*time.Minute)); err != nil || n != 2 {
			t.Fatalf("TakeCanceledSent once the take lapsed = %v, %v; want 2", n, err)
		}
		if ok, err := s.ForgetCanceledSent(ctx, "j", list[0].Sent); err != nil || !ok {
			t.Fatalf("ForgetCanceledSent = %v, %v; want true", ok, err)
		}
		if list, err := s.CanceledSent(ctx, 10); err != nil || len(list) != 0 {
			t.Fatalf("CanceledSent = %+v, %v; want none once forgotten", list, err)
		}
		want(t, "j", "once forgotten", "", false)
	})
}

// StepInput, the read each step makes of its job, reports how many of the
// task's messages the job was given (Job.Told), so that a running job
// learns of those told by a follow-up's Take without reading its whole
// row again at each step.
func TestStepInputReportsTold(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		j := storeJob("j", Running, storeT0)
		j.Told = 1
		mustCreate(t, ctx, s, j)
		if ok, err := s.AddMessages(ctx, "j", 1, 3, "Message from the requester: and be brief", storeT0); err != nil || !ok {
			t.Fatalf("AddMessages = %v, %v", ok, err)
		}
		pending, _, _, told, err := s.StepInput(ctx, "j")
		if err != nil {
			t.Fatal(err)
		}
		if told != 3 || pending == "" {
			t.Fatalf("StepInput = %q, told %d; want the message, told 3", pending, told)
		}
	})
}

// Every end of a job but its success, and a rewind to a checkpoint, give
// the model's record up to be canceled: a job halted at its cost, step or
// time limit (or whose task failed elsewhere) and a canceled one are
// listed (CanceledSent) until one process takes the record, once; a job
// rewound (Save.Rewound) is too, and its next step is given no record,
// so that it opens new work elsewhere. A success drops the record (the
// model's work ended with its answer), and a wait for a human keeps it
// for the step that resumes the job. Before, only a canceled job's record
// was listed: a halted job's was dropped, its work elsewhere left open,
// and a rewound job's next step continued the work of the steps undone.
func TestStoreSentToCancelWhenTheJobEndsOrRewinds(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		withRecord := func(t *testing.T, id string) *Job {
			t.Helper()
			j := storeJob(id, Pending, storeT0)
			mustCreate(t, ctx, s, j)
			if ok, err := s.Claim(ctx, id, "h1", at(0), at(time.Minute)); err != nil || !ok {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			j.Status = Running
			if err := s.Write(ctx, Save{Job: j, Holder: "h1"}); err != nil {
				t.Fatal(err)
			}
			if err := s.KeepSent(ctx, id, "h1", []byte("work of "+id)); err != nil {
				t.Fatal(err)
			}
			return j
		}
		for _, st := range []Status{HaltedCost, HaltedTime, Canceled, Success, InterventionRequired} {
			j := withRecord(t, string(st))
			j.Status, j.Reason = st, "it ended"
			if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
				t.Fatal(err)
			}
		}
		// Rewound: the job waited, and a resume from a checkpoint queues it.
		j := withRecord(t, "rewound")
		j.Status = InterventionRequired
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		j.Status = Pending
		if err := s.Write(ctx, Save{Job: j, Expect: InterventionRequired, Rewound: true, Input: "restarted from a checkpoint"}); err != nil {
			t.Fatal(err)
		}
		list, err := s.CanceledSent(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range list {
			if string(c.Sent) != "work of "+c.TaskID {
				t.Errorf("CanceledSent: %s with %q", c.TaskID, c.Sent)
			}
			got = append(got, c.TaskID)
		}
		slices.Sort(got) // listed in the order given up
		if want := []string{"CANCELED", "HALTED_COST", "HALTED_TIME", "rewound"}; !slices.Equal(got, want) {
			t.Fatalf("CanceledSent lists %q; want %q", got, want)
		}
		for _, id := range got {
			if k := sentStep(t, s, id); k.Record != nil {
				t.Errorf("%s: a step is given the record %q; want none: it is to be canceled", id, k.Record)
			}
		}
		if k := sentStep(t, s, "INTERVENTION_REQUIRED"); string(k.Record) != "work of INTERVENTION_REQUIRED" || !k.Answered {
			t.Errorf("a job waiting for a human: record %q, answered %v; want it kept, answered", k.Record, k.Answered)
		}
		if k := sentStep(t, s, "SUCCESS"); k.Record != nil {
			t.Errorf("a job that succeeded: record %q; want none", k.Record)
		}
		for _, c := range list {
			if n, err := s.TakeCanceledSent(ctx, c.TaskID, c.Sent, at(0), at(time.Minute)); err != nil || n != 1 {
				t.Fatalf("TakeCanceledSent(%s) = %v, %v; want 1", c.TaskID, n, err)
			}
			if n, err := s.TakeCanceledSent(ctx, c.TaskID, c.Sent, at(0), at(time.Minute)); err != nil || n != 0 {
				t.Fatalf("TakeCanceledSent(%s) again = %v, %v; want 0: taken once", c.TaskID, n, err)
			}
			if ok, err := s.ForgetCanceledSent(ctx, c.TaskID, c.Sent); err != nil || !ok {
				t.Fatalf("ForgetCanceledSent(%s) = %v, %v; want true", c.TaskID, ok, err)
			}
		}
		if list, err := s.CanceledSent(ctx, 10); err != nil || len(list) != 0 {
			t.Fatalf("CanceledSent = %+v, %v; want none once forgotten", list, err)
		}

		// The rewound job's next step records new work, kept as any.
		if ok, err := s.Claim(ctx, "rewound", "h2", at(time.Second), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if err := s.KeepSent(ctx, "rewound", "h2", []byte("new work")); err != nil {
			t.Fatal(err)
		}
		if k := sentStep(t, s, "rewound"); string(k.Record) != "new work" || k.Answered {
			t.Errorf("the rewound job's next step: record %q, answered %v; want its own, not answered", k.Record, k.Answered)
		}
	})
}

// A record another process holds (its take live) is not listed: a page of
// records (CanceledSent's limit) whose cancel is in flight, or whose
// peer does not answer, does not hold up the records after it, nor keep
// a second replica from taking them.
func TestCanceledSentSkipsLiveTakes(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		for _, id := range []string{"a", "b"} {
			j := storeJob(id, Pending, storeT0)
			mustCreate(t, ctx, s, j)
			if ok, err := s.Claim(ctx, id, "h1", at(0), at(time.Minute)); err != nil || !ok {
				t.Fatalf("Claim(%s) = %v, %v", id, ok, err)
			}
			if err := s.KeepSent(ctx, id, "h1", []byte(`{"task":"t-`+id+`"}`)); err != nil {
				t.Fatal(err)
			}
			j.Status, j.Reason = Canceled, "the task was canceled"
			if err := s.Write(ctx, Save{Job: j}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.TakeCanceledSent(ctx, "a", []byte(`{"task":"t-a"}`), at(0), at(time.Minute)); err != nil || n != 1 {
			t.Fatalf("TakeCanceledSent(a) = %v, %v; want 1", n, err)
		}
		list, err := s.CanceledSentUntaken(ctx, at(time.Second), 1)
		if err != nil || len(list) != 1 || list[0].TaskID != "b" {
			t.Fatalf("CanceledSentUntaken, a's take live, a page of 1 = %+v, %v; want b's record", list, err)
		}
		if list, err := s.CanceledSent(ctx, 10); err != nil || len(list) != 2 {
			t.Fatalf("CanceledSent, a's take live = %+v, %v; want a's and b's", list, err)
		}
		list, err = s.CanceledSentUntaken(ctx, at(time.Minute+time.Second), 10)
		if err != nil || len(list) != 2 {
			t.Fatalf("CanceledSentUntaken once a's take lapsed = %+v, %v; want a's and b's", list, err)
		}
	})
}
