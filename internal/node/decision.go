package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// An operator decides on an action a task waits on with a signed
// message/send that continues the task and carries one data part:
//
//	{"decision": "approve" | "deny", "reason"?: string, "actionId"?: string,
//	 "diffSha256"?: string}
//
// reason (at most 1024 bytes) is the note a denied task fails with;
// actionId, when given, must be the action the task waits on, so that a
// decision about one action cannot land on another; diffSha256, when
// given (64 lowercase hex digits), must be the SHA-256 of the action's
// diff as it is held when the approval runs, so that an approval of one
// diff cannot carry out another (the files changed and the action was
// held again). Any other member is
// refused. Only identities with the operator role may decide, and never on
// their own proposal; anyone else's decision is refused with 1004 naming
// the field, and a stranger to the task gets 1001 as if it did not exist.
type decision struct {
	approve  bool
	reason   string
	actionID string
	diff     string // proposals.DiffSum of the diff approved; "": any
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
	if d.diff, err = str("diffSha256"); err != nil {
		return "", nil, err
	}
	if _, ok := obj["diffSha256"]; ok && !proposals.ValidDiffSum(d.diff) {
		return "", nil, snap.FieldError(decisionPart+".diffSha256", "pattern", "^[0-9a-f]{64}$", d.diff)
	}
	for name := range obj {
		if !slices.Contains([]string{"decision", "reason", "actionId", "diffSha256"}, name) {
			return "", nil, snap.FieldError(decisionPart+"."+name, "additionalProperties", false, name)
		}
	}
	return req.TaskID, d, nil
}

// registerMethods registers the protocol methods on router: the task
// service's, with message/send and message/stream first offered to props
// (when proposals run) for an operator's decision on a held action. A
// canceled task's held actions are withdrawn by the task service's Ended
// (see startTasks), as those of any task this process ends.
func registerMethods(router *snap.Router, svc *tasks.Service, props *proposals.Proposals, logger *slog.Logger) {
	if props == nil {
		svc.Register(router, nil)
		return
	}
	d := decisions{props: props, tasks: svc, logger: logger}
	svc.Register(router, d.tryDecision)
}

// decisions carries signed operator decisions to the proposals.
type decisions struct {
	props  *proposals.Proposals
	tasks  *tasks.Service
	logger *slog.Logger
}

// tryDecision carries out req, whose params the router decoded, if it is
// a decision, and reports whether it was one (a malformed decision is one,
// answered with its error); it is the task service's tasks.Interceptor
// of message/send and message/stream (a decision is answered at once,
// with no events).
func (p decisions) tryDecision(ctx context.Context, req *snap.Verified, params *tasks.SendParams) (any, bool, error) {
	if req == nil || req.Message == nil || !req.Signed || req.Type != snap.TypeRequest {
		return nil, false, nil // the task service answers with the right error
	}
	taskID, d, err := parseDecision(params)
	if err != nil {
		return nil, true, err
	}
	if d == nil {
		return nil, false, nil
	}
	// The request's replay record, when the server left it to the
	// handler, is written in the decision's first commit (see
	// proposals.Decision.Claim); one refused before is written by the
	// server.
	t, err := p.decideSigned(ctx, req.From, taskID, d, p.tasks.TxClaim(req.Claim))
	if err != nil {
		return nil, true, err
	}
	return &tasks.TaskResponse{Task: t}, true, nil
}

// decideSigned carries out d for approver, an authenticated address, and
// answers the proposals' refusals as SNAP errors naming the field.
func (p decisions) decideSigned(ctx context.Context, approver, taskID string, d *decision, claim *tasks.TxClaim) (*tasks.Task, error) {
	// The task as approver may see it: 1001 for a stranger to it.
	none := 0
	if _, err := p.tasks.GetTask(ctx, approver, &tasks.GetParams{TaskID: taskID, HistoryLength: &none}); err != nil {
		return nil, err
	}
	if !p.tasks.IsOperator(approver) {
		// Only the task's owner gets here: it proposed the action.
		return nil, notApprover("only an operator other than the proposer may decide; the proposer may not")
	}
	reason := d.reason
	if !d.approve && reason == "" {
		reason = "denied by operator " + approver
	}
	t, err := p.props.Decide(ctx, proposals.Decision{TaskID: taskID, ActionID: d.actionID, Approver: approver, Approve: d.approve, Reason: reason, Diff: d.diff, Claim: claim})
	if err != nil {
		return nil, decisionRefusal(err, taskID, d)
	}
	out := *t
	out.Metadata = nil // node-local, never sent to peers
	return &out, nil
}

// decisionRefusal answers err, Decide's refusal of d on taskID, as a SNAP
// error naming the field.
func decisionRefusal(err error, taskID string, d *decision) error {
	var (
		se *proposals.StateError
		he *proposals.HeldError
		te *proposals.TakenUpError
		ha *proposals.HeldAgainError
	)
	switch {
	case errors.Is(err, snap.ErrClaimTaken):
		return err // a duplicate: the server answers it as one
	case errors.As(err, &ha):
		// Its id is spent (see proposals.Decide): not retryable,
		// whatever failed.
		e := snap.FieldError("payload.taskId", "approval failed", "an approval carried out", "held again")
		e.Message = ha.Error()
		e.Data["taskId"], e.Data["actionId"] = ha.TaskID, ha.ActionID
		return e
	case errors.Is(err, proposals.ErrUnderWay):
		// Retryable: the requester's id stays unspent (see Decide).
		return snap.NewError(snap.CodeServiceUnavailable, "an approval of the task's action is under way; retry",
			map[string]any{"taskId": taskID, "retryAfter": 1})
	case errors.Is(err, executor.ErrBusy):
		// The approval's first commit found another action of the task
		// being promoted and decided nothing: retryable, its id unspent.
		return snap.NewError(snap.CodeServiceUnavailable, "another action of the task is being carried out; retry once it is done",
			map[string]any{"taskId": taskID, "retryAfter": 1})
	case errors.As(err, &te):
		received := "taken up as interrupted"
		if te.HeldAgain {
			received = "held again"
		}
		e := snap.FieldError("payload.taskId", "interrupted", "an approval within reconcile_after", received)
		e.Message = te.Error()
		e.Data["taskId"], e.Data["actionId"] = te.TaskID, te.ActionID
		return e
	case errors.As(err, &se):
		e := snap.FieldError("payload.taskId", "state", string(tasks.StateInputRequired), string(se.State))
		e.Message = se.Error()
		e.Data["taskId"], e.Data["state"] = taskID, string(se.State)
		return e
	case errors.As(err, &he) && errors.Is(err, proposals.ErrNoHeld):
		return snap.FieldError("payload.taskId", "pending action", "a task waiting on an action", "no action pending")
	case errors.As(err, &he) && errors.Is(err, proposals.ErrNotHeld):
		return snap.FieldError(decisionPart+".actionId", "pending action", he.Held, d.actionID)
	case errors.As(err, &he) && errors.Is(err, proposals.ErrDiffChanged):
		e := snap.FieldError(decisionPart+".diffSha256", "diff", he.DiffSum, d.diff)
		e.Message = he.Error()
		return e
	case errors.As(err, &he) && errors.Is(err, proposals.ErrAmbiguous):
		e := snap.FieldError(decisionPart+".actionId", "required", he.Held, "")
		e.Message = he.Error()
		return e
	case errors.Is(err, executor.ErrSelfApproval):
		return notApprover("the proposer of an action may not decide on it, operator or not")
	case errors.Is(err, executor.ErrNotOperator):
		return notApprover("only an operator other than the proposer may decide")
	case errors.Is(err, executor.ErrNoPending):
		return snap.FieldError("payload.taskId", "pending action", "a task waiting on an action", "decided already")
	}
	return err
}

// notApprover is the refusal of a decision from an identity that may not
// make it.
func notApprover(why string) *snap.Error {
	e := snap.FieldError(decisionField, "approver", "an operator other than the proposer", "the sender")
	e.Message = fmt.Sprintf("invalid %s: %s", decisionField, why)
	return e
}

// methodNames records the names of the methods registered on it.
type methodNames []string

func (m *methodNames) Handle(method string, _ func(context.Context, *snap.Verified) (any, error)) {
	*m = append(*m, method)
}

func (m *methodNames) HandleStream(method string, _ snap.StreamHandlerFunc) { *m = append(*m, method) }

// taskMethods returns the names of the methods svc registers.
func taskMethods(svc *tasks.Service) []string {
	var m methodNames
	svc.Register(&m, nil)
	return m
}
