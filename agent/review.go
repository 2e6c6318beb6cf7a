package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The phases of a job and the roles that answer in them. A job starts in
// the work phase, where the worker acts; with review on (Config.Review), a
// worker's COMPLETED moves it to the review phase, where the supervisor
// reads the task, the worker's summary and its evidence files and answers
// COMPLETED (the job is done), RETRY (the work phase starts again with the
// supervisor's reasons) or STUCK (a human decides).
const (
	PhaseWork      = "work"
	PhaseReview    = "review"
	RoleWorker     = "Worker"
	RoleSupervisor = "Supervisor"
)

// supervisorPrompt is the supervisor's system prompt: its role, what it
// is shown, and the only answers it may give.
const supervisorPrompt = `You are the supervisor of a snapnode host's agent. A worker has worked on the task below in
the host's sandbox (/sandbox/) and says it is done. You cannot act on the workspace: you judge the
work. You are shown the task, the worker's summary and the evidence files it listed, as the host
read them just now.

Answer with exactly one JSON object and nothing else: no prose, no markdown fences.
  {"action":"COMPLETED","evidence_files":["/sandbox/..."],"summary_for_supervisor":"<why the work is accepted>"}
  {"action":"RETRY","evidence_files":[],"summary_for_supervisor":"<what is wrong and what the worker must change>"}
  {"action":"STUCK","evidence_files":[],"summary_for_supervisor":"<what a human must decide>"}
COMPLETED accepts the work: the task is answered with the worker's summary.
RETRY sends the work back: the worker starts its phase again and is told your reasons, so say
exactly what is missing or wrong. STUCK hands the task to a human.
The summary is at most 500 characters. Proposals (file actions) are refused from you.`

// reviewedNote is added to the worker's system prompt when its work is
// reviewed.
const reviewedNote = `

A supervisor reviews your work when you say it is done (COMPLETED, or FINISH): list in
evidence_files every file the supervisor should read, and say in the summary what you did.`

// reviewing reports whether the job is in its review phase.
func (jr *jobRun) reviewing() bool { return jr.j.Phase == PhaseReview }

// phaseStatus is the status a claimed job works in: REVIEWING in the
// review phase, RUNNING otherwise.
func (jr *jobRun) phaseStatus() Status {
	if jr.reviewing() {
		return Reviewing
	}
	return Running
}

// turn is who answers the next call: the role, the model and its name.
func (jr *jobRun) turn() (role string, m Model, name string) {
	r := jr.r
	if jr.reviewing() {
		m, name = r.cfg.Model, r.cfg.ModelName
		if r.cfg.ReviewModel != nil {
			m, name = r.cfg.ReviewModel, r.cfg.ReviewModelName
		}
		return RoleSupervisor, m, name
	}
	return RoleWorker, r.cfg.Model, r.cfg.ModelName
}

// submission is the worker's COMPLETED answer under review; nil when the
// history lacks it.
func (jr *jobRun) submission() *Interaction {
	for i := len(jr.its) - 1; i >= 0; i-- {
		if jr.its[i].Sequence == jr.j.ReviewSeq {
			return &jr.its[i]
		}
	}
	return nil
}

// reviewMessage is the supervisor's first user message: the task, the
// worker's summary, and each evidence file as the executor reads it now
// (as the requester: the policy decides, the audit log records it), at
// most MaxObservationBytes each and a quarter of budget tokens in all.
func (jr *jobRun) reviewMessage(ctx context.Context, budget int) (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "Task from %s:\n%s\n", jr.j.Requester, jr.j.Description)
	sub := jr.submission()
	if sub == nil {
		b.WriteString("\nThe worker's answer is not in the job's history.\n")
		return jr.r.redact(b.String()), nil
	}
	fmt.Fprintf(&b, "\nThe worker answered COMPLETED with this summary:\n%s\n", sub.Response.SummaryForSupervisor)
	var files []string
	room := budget // bytes: a quarter of the budget's tokens at four bytes a token
	for _, f := range sub.Response.EvidenceFiles {
		p := "/sandbox/" + strings.TrimPrefix(strings.TrimPrefix(f, "/sandbox/"), "/")
		if slices.Contains(files, p) || len(files) == maxContextFiles {
			continue
		}
		content, size, ok := jr.readText(ctx, p, min(jr.r.cfg.MaxObservationBytes, room))
		if !ok {
			fmt.Fprintf(&b, "\nThe evidence file %s cannot be read (missing, not text, too large, or refused by the policy).\n", p)
			continue
		}
		room -= len(content)
		files = append(files, p)
		fmt.Fprintf(&b, "\nThe evidence file %s (%d bytes) holds:\n%s\n", p, size, content)
	}
	if len(sub.Response.EvidenceFiles) == 0 {
		b.WriteString("\nThe worker listed no evidence files.\n")
	}
	return jr.r.redact(b.String()), files
}

// submitForReview applies a worker's COMPLETED (or FINISH, whose response
// is its summary) when review is on: the
// job's work phase ends at a recovery point (the actions it promoted since
// the last one, by executor action id, are what a resume from an earlier
// point undoes) and the review phase begins.
func (jr *jobRun) submitForReview(ctx context.Context, it *Interaction) (bool, error) {
	j := jr.j
	_, missing := jr.evidence(ctx, it.Response.EvidenceFiles)
	obs := &Observation{Outcome: ObsCompleted, Text: "submitted for the supervisor's review"}
	if len(missing) > 0 {
		obs.Reason = "evidence files not in the workspace: " + strings.Join(missing, ", ")
	}
	it.Observation = obs
	rp, err := jr.recoveryPoint(ctx, it, PhaseReview)
	if err != nil {
		return true, err
	}
	j.Status, j.Phase, j.ReviewSeq, j.RecoverySeq = Reviewing, PhaseReview, it.Sequence, it.Sequence+1
	it.Response.NewStatus = Reviewing
	if err := jr.recordWith(ctx, it, rp); err != nil {
		return true, err
	}
	jr.progress(ctx, it, "submitted for review")
	return false, nil
}

// recoveryPoint is the recovery point the phase that it ends makes: the
// phase, the answer's sequence, the phase a resume from it goes on with,
// and as rollback_files the executor action ids of the changes made since
// the previous recovery point (what a resume from that one undoes).
func (jr *jobRun) recoveryPoint(ctx context.Context, it *Interaction, resume string) (*RecoveryPoint, error) {
	rps, err := jr.r.cfg.Store.RecoveryPoints(ctx, jr.j.TaskID)
	if err != nil {
		return nil, err
	}
	after := -1
	if n := len(rps); n > 0 {
		after = rps[n-1].Sequence
	}
	files := it.Response.EvidenceFiles
	return &RecoveryPoint{CheckpointID: fmt.Sprintf("%s-complete-%d", jr.j.Phase, it.Sequence), Sequence: it.Sequence,
		CanResumeFrom: true, ResumePhase: resume, RollbackFiles: changedActions(jr.its, after, it.Sequence),
		Description: cut(it.Response.SummaryForSupervisor, 200),
		Metadata:    map[string]any{"phase": jr.j.Phase, "evidence_files": files, "evidence_count": len(files)}}, nil
}

// changedActions are the executor action ids of the actions that changed
// the workspace (carried out, or approved and carried out) in the
// interactions after sequence after up to and including upTo, in order.
func changedActions(its []Interaction, after, upTo int) []string {
	var ids []string
	for _, it := range its {
		o := it.Observation
		if it.Sequence <= after || it.Sequence > upTo || o == nil || o.ActionID == "" ||
			(o.Outcome != ObsCompleted && o.Outcome != ObsApproved) || readOnly(it.Response.Action) {
			continue
		}
		ids = append(ids, o.ActionID)
	}
	return ids
}

// readOnly reports whether an action never changes the workspace.
func readOnly(action string) bool {
	switch strings.ToUpper(action) {
	case "READ_FILE", "LIST_FILES", "THINK", "FINISH":
		return true
	}
	return false
}

// verdict applies the supervisor's answer. A proposal is refused (the
// supervisor does not act) like any invalid answer; COMPLETED ends the job
// with the worker's summary and evidence; RETRY sends the job back to the
// work phase, from the recovery point the worker's answer made, with the
// supervisor's reasons; STUCK waits for a human.
func (jr *jobRun) verdict(ctx context.Context, it *Interaction, ans *Answer) (bool, error) {
	r, j := jr.r, jr.j
	if ans.Kind != KindAgentResponse {
		return jr.invalid(ctx, it, &AnswerError{Rule: "kind",
			Message: "the supervisor answers with COMPLETED, RETRY or STUCK, not a proposal: it does not act on the workspace"})
	}
	resp := ans.Response
	summary := r.keepResponse(it, resp)
	sub := jr.submission()
	checkpoint := "the start of the job"
	if sub != nil {
		checkpoint = fmt.Sprintf("%s-complete-%d", PhaseWork, sub.Sequence)
	}
	switch resp.Action {
	case ActionCompleted:
		it.Observation = &Observation{Outcome: ObsCompleted, Text: "accepted"}
		// The task is completed with the work accepted (the
		// submission's summary and evidence) and the review (see
		// completion).
		var evidence []string
		if sub != nil {
			evidence = sub.Response.EvidenceFiles
		}
		arts, _ := jr.evidence(ctx, evidence)
		return true, jr.complete(ctx, it, nil, arts)
	case ActionStuck:
		return true, jr.stuckAnswered(ctx, it, "the supervisor needs a human: "+summary)
	default: // RETRY
		if jr.retriesExhausted() {
			return true, jr.stuckRetries(ctx, it, "the supervisor sent the work back", summary)
		}
		it.Observation = &Observation{Outcome: ObsRetried, Reason: "the work phase restarts from checkpoint " + checkpoint,
			Text: "the work goes back to the worker"}
		j.Status, j.Phase, j.ReviewSeq, j.RecoverySeq = Running, PhaseWork, -1, it.Sequence+1
		it.Response.NewStatus = Running
		note := fmt.Sprintf("The supervisor reviewed your work and sent it back (retry %d of %d); the work phase starts again from checkpoint %s, with the workspace as you left it. The supervisor's reasons: %s",
			j.Retries, r.cfg.MaxRetries, checkpoint, summary)
		return jr.restart(ctx, it, note, "sent back by the supervisor")
	}
}
