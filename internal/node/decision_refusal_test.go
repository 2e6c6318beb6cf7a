package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
)

// TestDecisionRefusal: a signed decision refused by proposals.Decide is
// answered 1004 naming the field and saying why, not 5001 "internal
// error", which tells the operator nothing.
func TestDecisionRefusal(t *testing.T) {
	takenUp := func(again bool) error {
		return fmt.Errorf("decide: %w", &proposals.TakenUpError{TaskID: "t1", ActionID: "a1", HeldAgain: again,
			Err: fmt.Errorf("%w: action a1 is no longer approving", executor.ErrTakenUp)})
	}
	for _, c := range []struct {
		name       string
		err        error
		field, con string
		says       []string
	}{
		{"an approval another process took up, held again", takenUp(true), "payload.taskId", "interrupted",
			[]string{"reconcile_after", "another process took the action up as interrupted", "held again", "approve it again"}},
		{"an approval another process took up and settled", takenUp(false), "payload.taskId", "interrupted",
			[]string{"reconcile_after", "no longer held"}},
		{"decided already", fmt.Errorf("%w: %q", executor.ErrNoPending, "a1"), "payload.taskId", "pending action", nil},
		// Its id spent by its first commit: never 5003, whatever failed
		// after it (here another action being carried out).
		{"an approval recorded, then failed, held again", fmt.Errorf("decide: %w", &proposals.HeldAgainError{TaskID: "t1", ActionID: "a1",
			Err: &executor.DecidedError{ActionID: "a1", HeldAgain: true, Err: fmt.Errorf("approve a1: %w", executor.ErrBusy)}}),
			"payload.taskId", "approval failed", []string{"recorded, then failed", "held again", "approve it again"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decisionRefusal(c.err, "t1", &decision{approve: true, actionID: "a1"})
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload {
				t.Fatalf("refusal %v (%T), want a 1004 *snap.Error", err, err)
			}
			if se.Data["field"] != c.field || se.Data["constraint"] != c.con {
				t.Errorf("data %v, want field %s, constraint %s", se.Data, c.field, c.con)
			}
			for _, want := range c.says {
				if !strings.Contains(se.Message, want) {
					t.Errorf("message %q does not say %q", se.Message, want)
				}
			}
		})
	}
}

// TestDecisionRefusalRetryable: a signed decision refused because
// another action of its task is being carried out (executor.ErrBusy), or
// because an approval of its action is under way (proposals.ErrUnderWay),
// decided nothing and leaves its id unspent: it is answered 5003 with a
// retryAfter and a message saying why, as SNAP asks a requester to retry
// the same message then, not 5001 "internal error".
func TestDecisionRefusalRetryable(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		says string
	}{
		{"another action being carried out", fmt.Errorf("approve a2: %w", executor.ErrBusy), "another action of the task is being carried out"},
		{"an approval under way", fmt.Errorf("task t1: %w: %w", proposals.ErrUnderWay, executor.ErrNoPending), "under way"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decisionRefusal(c.err, "t1", &decision{approve: true, actionID: "a1"})
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeServiceUnavailable {
				t.Fatalf("refusal %v (%T), want a 5003 *snap.Error", err, err)
			}
			if se.Data["taskId"] != "t1" || se.Data["retryAfter"] == nil {
				t.Errorf("data %v, want the task id and a retryAfter", se.Data)
			}
			if !strings.Contains(se.Message, c.says) {
				t.Errorf("message %q does not say %q", se.Message, c.says)
			}
		})
	}
}
