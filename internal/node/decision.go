package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// An operator decides on an action a task waits on with a signed
// message/send that continues the task and carries one data part:
//
//	{"decision": "approve" | "deny", "reason"?: string, "actionId"?: string}
//
// reason (at most 1024 bytes) is the note a denied task fails with;
// actionId, when given, must be the action the task waits on, so that a
// decision about one action cannot land on another. Any other member is
// refused. Only identities with the operator role may decide, and never on
// their own proposal; anyone else's decision is refused with 1004 naming
// the field, and a stranger to the task gets 1001 as if it did not exist.
type decision struct {
	approve  bool
	reason   string
	actionID string
}

// The fields of a decision, as named in errors.
const (
	decisionPart  = "payload.message.parts[0].data"
	decisionField = decisionPart + ".decision"
)

// maxDecisionReason bounds a deny's reason, as a task status message.
const maxDecisionReason = tasks.MaxStatusMessage

// parseDecision reads the params of a message/send, as the router decoded
// them, as an operator's decision. It returns nil when they are not one
// (no taskId, or not exactly one data part with a "decision" member), for
// the task service to handle as any other message; an error when they are
// one but malformed.
func parseDecision(req *tasks.SendParams) (taskID string, d *decision, err error) {
	if req.TaskID == "" || len(req.Message.Parts) != 1 || req.Message.Parts[0].Data == nil {
		return "", nil, nil // not a decision; the task service answers it
	}
	var obj map[string]jsontext.Value
	if json.Unmarshal(req.Message.Parts[0].Data, &obj) != nil {
		return "", nil, nil
	}
	if _, ok := obj["decision"]; !ok {
		return "", nil, nil
	}
	d = &decision{}
	str := func(name string) (string, error) {
		v, ok := obj[name]
		if !ok {
			return "", nil
		}
		var s string
		if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
			return "", snap.FieldError(decisionPart+"."+name, "type", "string", string(v.Kind()))
		}
		return s, nil
	}
	word, err := str("decision")
	if err != nil {
		return "", nil, err
	}
	switch word {
	case "approve":
		d.approve = true
	case "deny":
	default:
		return "", nil, snap.FieldError(decisionField, "enum", []string{"approve", "deny"}, word)
	}
	if d.reason, err = str("reason"); err != nil {
		return "", nil, err
	}
	if len(d.reason) > maxDecisionReason || !utf8.ValidString(d.reason) {
		return "", nil, snap.FieldError(decisionPart+".reason", "maxLength", maxDecisionReason, len(d.reason))
	}
	if d.actionID, err = str("actionId"); err != nil {
		return "", nil, err
	}
	for name := range obj {
		if !slices.Contains([]string{"decision", "reason", "actionId"}, name) {
			return "", nil, snap.FieldError(decisionPart+"."+name, "additionalProperties", false, name)
		}
	}
	return req.TaskID, d, nil
}

// tryDecision carries out req, whose params the router decoded, if it is
// a decision, and reports whether it was one (a malformed decision is one,
// answered with its error); it is the task service's tasks.Interceptor
// of message/send and message/stream (a decision is answered at once,
// with no events).
func (p *proposals) tryDecision(ctx context.Context, req *snap.Verified, params *tasks.SendParams) (any, bool, error) {
	taskID, d, err := parseDecision(params)
	if err != nil {
		return nil, true, err
	}
	if d == nil {
		return nil, false, nil
	}
	t, err := p.decideSigned(ctx, req.From, taskID, d)
	if err != nil {
		return nil, true, err
	}
	return &tasks.TaskResponse{Task: t}, true, nil
}

// decideSigned carries out d for approver, an authenticated address.
func (p *proposals) decideSigned(ctx context.Context, approver, taskID string, d *decision) (*tasks.Task, error) {
	// The task as approver may see it: 1001 for a stranger to it.
	none := 0
	t, err := p.tasks.GetTask(ctx, approver, &tasks.GetParams{TaskID: taskID, HistoryLength: &none})
	if err != nil {
		return nil, err
	}
	if !p.tasks.IsOperator(approver) {
		// Only the task's owner gets here: it proposed the action.
		return nil, notApprover("only an operator other than the proposer may decide; the proposer may not")
	}
	if t.Status.State != tasks.StateInputRequired {
		return nil, snap.FieldError("payload.taskId", "state", string(tasks.StateInputRequired), string(t.Status.State))
	}
	pa, err := p.pending(ctx, taskID, d.actionID)
	switch {
	case errors.Is(err, errNoHeld):
		return nil, snap.FieldError("payload.taskId", "pending action", "a task waiting on an action", "no action pending")
	case errors.Is(err, errNotHeld):
		return nil, snap.FieldError(decisionPart+".actionId", "pending action", "an action the task holds", d.actionID)
	case errors.Is(err, errHeldAmbiguous):
		return nil, snap.FieldError(decisionPart+".actionId", "required", "the id of one of the actions the task holds", "")
	case err != nil:
		return nil, err
	}
	reason := d.reason
	if !d.approve && reason == "" {
		reason = "denied by operator " + approver
	}
	t, err = p.decide(ctx, taskID, pa.ActionID, approver, d.approve, reason)
	switch {
	case errors.Is(err, executor.ErrSelfApproval):
		return nil, notApprover("the proposer of an action may not decide on it, operator or not")
	case errors.Is(err, executor.ErrNotOperator):
		return nil, notApprover("only an operator other than the proposer may decide")
	case errors.Is(err, executor.ErrNoPending):
		return nil, snap.FieldError("payload.taskId", "pending action", "a task waiting on an action", "decided already")
	case err != nil:
		return nil, err
	}
	out := *t
	out.Metadata = nil // node-local, never sent to peers
	return &out, nil
}

// notApprover is the refusal of a decision from an identity that may not
// make it.
func notApprover(why string) *snap.Error {
	e := snap.FieldError(decisionField, "approver", "an operator other than the proposer", "the sender")
	e.Message = fmt.Sprintf("invalid %s: %s", decisionField, why)
	return e
}
