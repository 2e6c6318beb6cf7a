package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// What a model keeps of a step it sent (a delegate's idempotency key)
// stays in the job's row while the step is tried again: across a failed
// call recorded and the lease given up (the node stopped), so the node
// that claims the job next gets it back. The holder alone writes it. The
// write that records the model's answer clears it, and so does one that
// makes the job wait for a human.
func TestStoreKeepsSentStep(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		sent := func(t *testing.T) string {
			t.Helper()
			_, _, b, _, err := s.StepInput(ctx, "j")
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
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
		if got := sent(t); got != "" {
			t.Fatalf("a new job's sent step = %q; want none", got)
		}
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
		if got := sent(t); got != step {
			t.Fatalf("after a failed call and a stop, the sent step = %q; want %q", got, step)
		}
		if ok, err := s.Claim(ctx, "j", "h2", at(time.Second), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		j.NextSeq = 2
		if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(1, "read"), Holder: "h2"}); err != nil {
			t.Fatal(err)
		}
		if got := sent(t); got != "" {
			t.Fatalf("after the answer was recorded, the sent step = %q; want none", got)
		}
		if err := s.KeepSent(ctx, "j", "h2", []byte(step)); err != nil {
			t.Fatal(err)
		}
		j.Status, j.Reason = InterventionRequired, "the delegate did not answer"
		if err := s.Write(ctx, Save{Job: j, Holder: "h2", Unsettled: true}); err != nil {
			t.Fatal(err)
		}
		if got := sent(t); got != "" {
			t.Fatalf("once the job waits for a human, the sent step = %q; want none: a resumed job starts the step afresh", got)
		}
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
