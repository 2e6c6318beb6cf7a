package agent

import (
	"fmt"
	"slices"
)

// ReplayError is the first inconsistency Replay found in a history.
type ReplayError struct {
	// Sequence is the interaction's (-1: the history as a whole).
	Sequence int
	// Field is the member at fault, as in the history's JSON.
	Field   string
	Message string
}

func (e *ReplayError) Error() string {
	if e.Sequence < 0 {
		return fmt.Sprintf("history: %s: %s", e.Field, e.Message)
	}
	return fmt.Sprintf("interaction %d: %s: %s", e.Sequence, e.Field, e.Message)
}

// Replay re-validates a job's history, interaction by interaction, as the
// runtime produced it: sequences count from 0 without gaps, the messages
// of a call hash to its MessagesSHA256 when it has one (a history
// written by an older build has none: see Replayer.Unhashed), timestamps
// never go back, a call is made only while the job runs and none after it
// ended, every stored answer parses again (with maxAnswer, the runtime's
// cap) to the recorded kind and action (and an invalid one still fails;
// a redacted one only so far as it still parses),
// a late line a worker wrote, skipped during a call, names a step before
// the call's and at most MaxLateLines are told,
// every state transition is one the runtime makes for that answer and
// observation (the last may end the job CANCELED: the step its cancel
// gave up), what a step's observation says the model was told is what
// the next call sent after its answer (replayTold), and the job's status
// agrees with the last transition. It makes no model call. It
// returns the first inconsistency as a *ReplayError, nil when there is
// none.
func Replay(h *History, maxAnswer int) error {
	if h.JobID == "" {
		return &ReplayError{Sequence: -1, Field: "job_id", Message: "empty"}
	}
	r := NewReplayer(maxAnswer)
	for i := range h.Interactions {
		if err := r.Add(&h.Interactions[i]); err != nil {
			return err
		}
	}
	return r.End(h)
}

// A Replayer is Replay over a history given one interaction at a time
// (Add), then the rest of it (End): it holds the last interaction it
// was given, not the history, so a long history replays in bounded
// memory (Store.ReplayJob, ReplayJSON).
type Replayer struct {
	maxAnswer int
	n         int          // interactions given
	unhashed  int          // of them, with messages but no MessagesSHA256
	last      *Interaction // the one before pending, checked
	pending   *Interaction // the newest, checked but against the next
	// ending are the sequences of the COMPLETED and FINISH answers: the
	// steps a recovery point may name.
	ending map[int]bool
}

// NewReplayer returns a Replayer that parses answers with maxAnswer, the
// runtime's cap.
func NewReplayer(maxAnswer int) *Replayer {
	return &Replayer{maxAnswer: maxAnswer, ending: make(map[int]bool)}
}

func replayFail(seq int, field, format string, args ...any) error {
	return &ReplayError{Sequence: seq, Field: field, Message: fmt.Sprintf(format, args...)}
}

// N is how many interactions r was given.
func (r *Replayer) N() int { return r.n }

// Unhashed is how many of the interactions r was given sent messages
// but carry no MessagesSHA256 (a history written by an older build):
// their messages were replayed unchecked, and an edit of them cannot
// show.
func (r *Replayer) Unhashed() int { return r.unhashed }

// Add checks the next interaction of the history, it, which r keeps
// until the next Add.
func (r *Replayer) Add(it *Interaction) error {
	i := r.n
	if it.Sequence != i {
		return replayFail(i, "sequence", "missing or out of order: interaction %d is in its place", it.Sequence)
	}
	switch sum := it.Request.MessagesSHA256; {
	case sum == "" && len(it.Request.Messages) > 0:
		r.unhashed++
	case sum != "" && messagesHash(it.Request.Messages) != sum:
		return replayFail(i, "request.messages_sha256", "the messages do not hash to it: the request was altered")
	}
	if r.pending != nil {
		if err := r.check(r.pending, it); err != nil {
			return err
		}
		r.last = r.pending
	}
	if last := r.last; last != nil {
		if it.Timestamp.Before(last.Timestamp) {
			return replayFail(i, "timestamp", "%s is before the previous interaction's %s", it.Timestamp, last.Timestamp)
		}
		if last.Response.NewStatus.Terminal() {
			return replayFail(i, "state_before", "a call after the job ended %s", last.Response.NewStatus)
		}
	}
	if it.StateBefore != Running && it.StateBefore != Reviewing {
		return replayFail(i, "state_before", "%s: the model is called only while the job runs", it.StateBefore)
	}
	if (it.StateBefore == Reviewing) != (it.Request.Metadata.Role == RoleSupervisor) {
		return replayFail(i, "request.metadata.role", "%s while the job is %s: the supervisor answers exactly in the review", it.Request.Metadata.Role, it.StateBefore)
	}
	if n := len(it.Response.LateLines); n > MaxLateLines {
		return replayFail(i, "response.late_lines", "%d late lines; a worker that writes more than %d is stopped", n, MaxLateLines)
	}
	for _, s := range it.Response.LateLines {
		if s < 0 || s >= it.Sequence {
			return replayFail(i, "response.late_lines", "a late line for step %d skipped during step %d: only a line for a past step is skipped", s, it.Sequence)
		}
	}
	if err := replayResponse(it, r.maxAnswer); err != nil {
		return err
	}
	if a := it.Response.Action; a == ActionCompleted || a == "FINISH" {
		r.ending[i] = true
	}
	r.pending, r.n = it, r.n+1
	return nil
}

// check is what Add checks of it once the next interaction is known:
// its transition, and what next was told of it; next is nil when it is
// the last.
func (r *Replayer) check(it, next *Interaction) error {
	if err := replayTransition(it, next == nil); err != nil {
		return err
	}
	if next != nil {
		return replayTold(it, next)
	}
	return nil
}

// End checks the last interaction given and the history's status and
// recovery points (h's interactions are not read: Add was given them).
func (r *Replayer) End(h *History) error {
	if h.JobID == "" {
		return replayFail(-1, "job_id", "empty")
	}
	last := r.pending
	if last != nil {
		if err := r.check(last, nil); err != nil {
			return err
		}
	}
	if last != nil && last.Response.NewStatus.Terminal() && h.Status != last.Response.NewStatus {
		return replayFail(-1, "status", "%s, but the last interaction ended the job %s", h.Status, last.Response.NewStatus)
	}
	if h.Status == Success && (last == nil || last.Response.NewStatus != Success) {
		return replayFail(-1, "status", "SUCCESS without an interaction that completed the job")
	}
	for _, rp := range h.RecoveryPoints {
		if rp.Sequence < 0 || rp.Sequence >= r.n {
			return replayFail(-1, "recovery_points", "checkpoint %s names interaction %d, which does not exist", rp.CheckpointID, rp.Sequence)
		}
		if !r.ending[rp.Sequence] {
			return replayFail(-1, "recovery_points", "checkpoint %s is not at a COMPLETED or FINISH answer", rp.CheckpointID)
		}
	}
	return nil
}

// replayResponse parses the stored answer again.
func replayResponse(it *Interaction, maxAnswer int) error {
	r := it.Response
	fail := func(field, format string, args ...any) error {
		return &ReplayError{Sequence: it.Sequence, Field: "response." + field, Message: fmt.Sprintf(format, args...)}
	}
	switch r.Kind {
	case KindAPIError, KindCanceled:
		if r.Status == ResponseSuccess || r.Error == "" || r.RawResponse != "" {
			return fail("status", "a failed call must have status ERROR or TIMEOUT, an error and no answer")
		}
		return nil
	}
	if r.Status != ResponseSuccess {
		return fail("status", "%s with an answer of kind %s", r.Status, r.Kind)
	}
	// A redacted answer is not the text the runtime parsed: taking the
	// secrets out may have made it shorter or longer, under or over
	// maxAnswer or a member's maximum, so only what it still shows is
	// checked.
	a, aerr := parseModelAnswer(r.RawResponse, maxAnswer)
	switch r.Kind {
	case KindInvalid:
		if aerr == nil && !r.Redacted && !(a.Kind == KindProposal && it.Request.Metadata.Role == RoleSupervisor) {
			return fail("raw_response", "recorded as invalid, but it parses as a %s", a.Kind)
		}
		return nil
	case KindProposal, KindAgentResponse:
		if aerr != nil && r.Redacted {
			return nil
		}
		if aerr != nil {
			return fail("raw_response", "recorded as a %s, but it does not parse: %v", r.Kind, aerr)
		}
		if a.Kind != r.Kind || a.Action != r.Action {
			return fail("action", "recorded %s %s, but the answer is %s %s", r.Kind, r.Action, a.Kind, a.Action)
		}
		if a.Kind == KindAgentResponse && !slices.Equal(a.Response.EvidenceFiles, r.EvidenceFiles) && !(len(a.Response.EvidenceFiles) == 0 && len(r.EvidenceFiles) == 0) {
			return fail("evidence_files", "recorded %v, but the answer lists %v", r.EvidenceFiles, a.Response.EvidenceFiles)
		}
		return nil
	}
	return fail("kind", "unknown kind %q", r.Kind)
}

// replayTransition checks state_before → new_status for the answer and its
// observation.
func replayTransition(it *Interaction, last bool) error {
	r, before, after := it.Response, it.StateBefore, it.Response.NewStatus
	obs := ""
	if it.Observation != nil {
		obs = it.Observation.Outcome
	}
	var allowed []Status
	switch r.Kind {
	case KindAPIError, KindCanceled:
		allowed = []Status{before}
	case KindInvalid:
		allowed = []Status{before, InterventionRequired}
	case KindProposal:
		switch {
		case obs == "" && last:
			allowed = []Status{before} // the node stopped before the action's outcome was stored
		case obs == ObsNeedsConfirmation, obs == ObsApproved, obs == ObsDenied:
			// Held; the outcome an operator gave later is written over.
			allowed = []Status{InterventionRequired}
		case obs == ObsFailed && r.NewStatus == InterventionRequired && it.Observation.ActionID != "":
			// Held, approved, and not carried out (Runtime.Decided).
			allowed = []Status{InterventionRequired}
		case obs == ObsCompleted && (r.Action == "FINISH" || r.Action == "finish"):
			allowed = []Status{Success, Reviewing} // Reviewing: submitted for review
		case obs == ObsCompleted, obs == ObsFailed, obs == ObsNone:
			allowed = []Status{before}
		default:
			return &ReplayError{Sequence: it.Sequence, Field: "observation", Message: fmt.Sprintf("a proposal's observation %q", obs)}
		}
	case KindAgentResponse:
		switch {
		case obs == ObsNone && it.Observation != nil && it.Observation.Reason != "":
			// Not acted on (the cost limit was reached), or waiting.
			allowed = []Status{before, InterventionRequired}
		case r.Action == ActionCompleted && it.Request.Metadata.Role == RoleWorker && before == Running:
			allowed = []Status{Success, Reviewing} // Reviewing: submitted for review
		case r.Action == ActionCompleted:
			allowed = []Status{Success}
		case r.Action == ActionStuck:
			allowed = []Status{InterventionRequired}
		case before == Reviewing:
			allowed = []Status{Running, InterventionRequired} // sent back to the worker
		default:
			allowed = []Status{before, InterventionRequired}
		}
	}
	if last {
		// The step the job's cancel gave up (its call stopped, its
		// answer not acted on), written with the job's end: its answer
		// and observation are checked all the same.
		allowed = append(allowed, Canceled)
	}
	if !slices.Contains(allowed, after) {
		return &ReplayError{Sequence: it.Sequence, Field: "response.new_status",
			Message: fmt.Sprintf("%s → %s after a %s %s (observation %q); the runtime goes to %v", before, after, r.Kind, r.Action, obs, allowed)}
	}
	return nil
}

// replayTold checks the step it against what the call after it, next,
// was sent: the model's answer is sent back to it, as the last step,
// followed by exactly what the model was told of it (observation.text).
// An observation an operator's decision gave later is not checked (the
// decision may have come while the next call was made), nor a step the
// next call did not show (a new phase).
func replayTold(it, next *Interaction) error {
	o, msgs := it.Observation, next.Request.Messages
	switch {
	case o == nil || o.Text == "" || len(msgs) == 0,
		it.Response.Kind == KindAPIError, it.Response.Kind == KindCanceled,
		o.DecidedAt != nil, o.Outcome == ObsApproved, o.Outcome == ObsDenied:
		return nil
	}
	answer := answerText(it.Response.RawResponse)
	if it.Response.Kind == KindInvalid {
		answer = fitText(answer, maxGuidance) // as the prompt shows it
	}
	at := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			at = i
			break
		}
	}
	if answer == "" || at < 0 || msgs[at].Content != answer {
		return nil
	}
	if at+1 >= len(msgs) || msgs[at+1].Content != o.Text {
		return &ReplayError{Sequence: it.Sequence, Field: "observation.text",
			Message: fmt.Sprintf("is not what interaction %d was sent after this step's answer", next.Sequence)}
	}
	return nil
}
