package agent

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

// jobRun is one claim of a job: the job as stored, its history, and what
// the loop needs between steps.
type jobRun struct {
	r      *Runtime
	j      *Job
	its    []Interaction
	shrink float64 // the prompt budget's factor, halved after a context-length error
	// builtFor is the context length, in tokens, the last prompt was
	// built for (Runtime.contextFor its model then).
	builtFor int
	// files are the context files the task message holds.
	files []string
	// fresh is where this claim's own steps begin in its when a human's
	// input resumed the job: the patterns and counts that made it wait
	// (stuck, invalid answers, failed calls) start again from there.
	fresh int
	// notes carries the steps' notes to their writer (startNotes).
	notes     chan noteRequest
	notesDone chan struct{}
	// dirty is an interaction completed (its observation) but not stored
	// yet: it goes with the next write, one commit a step. Until then a
	// crash leaves it without its observation, which the next claim
	// completes from the executor's record.
	dirty *Interaction
	// req is the peer's job request the task began with (nil: free
	// text); lim the job's limits, the operator's lowered by req.
	req *JobRequest
	lim limits
	// seen is where the input this claim's last model call was told
	// ended (StepInput); nil before its first call.
	seen *int64
	// caught is the job given its task's messages it was missing by the
	// last step's read of the task (propose): the next call need not read
	// the task again.
	caught bool
	// givenUp is the step the job's cancel gave up (its call stopped, or
	// its answer left unacted on or unwritten), to be written with the
	// job's end, CANCELED (see work); nil: none.
	givenUp *Interaction
	// cancel ends the job's context (work's): a read of the task that
	// finds it canceled before its event reached the job cancels it so.
	cancel context.CancelCauseFunc
}

// endWriteTimeout bounds the write of a canceled job's end (its status and
// the step it gave up), made once the job's own context is done.
const endWriteTimeout = 30 * time.Second

// work drives the job of taskID from its claim until it ends, waits for a
// human, is canceled, or the node stops.
func (r *Runtime) work(ctx context.Context, cancel context.CancelCauseFunc, taskID string) {
	r.wg.Go(func() { r.keep(ctx, taskID, cancel) })
	jr := &jobRun{r: r, shrink: 1, cancel: cancel}
	jr.startNotes(ctx)
	err := jr.run(ctx, taskID)
	jr.stopNotes()
	if e, ok := r.cfg.Model.(JobEnder); ok {
		e.EndJob(taskID)
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrCanceled):
		if jr.j != nil {
			// The job's context is done: the end is written on one of
			// its own, bounded. The step given up goes with it, under
			// its sequence: a write made again (a crash before the
			// answer) replaces it, never adds a second.
			bg, cancelWrite := context.WithTimeout(context.WithoutCancel(ctx), endWriteTimeout)
			jr.j.Status, jr.j.Reason = Canceled, "the task was canceled"
			if it := jr.givenUp; it != nil {
				it.Response.NewStatus = Canceled
			}
			if err := jr.save(bg, jr.givenUp); err == nil {
				_ = r.cfg.Store.Settle(bg, taskID, Canceled) // the task says canceled already
			} else {
				r.log.Warn("agent: the canceled job's end could not be written", "task", taskID, "err", err)
			}
			cancelWrite()
		}
		r.log.Info("agent: job canceled", "task", taskID)
	case errors.Is(cause, ErrLeaseLost):
		r.log.Warn("agent: lease lost; another process has the job", "task", taskID)
	case ctx.Err() != nil:
		// The node stops: the job is left as it is, for a restart.
		if jr.dirty != nil {
			_ = jr.save(context.WithoutCancel(ctx), nil)
		}
		_ = r.cfg.Store.Release(context.WithoutCancel(ctx), taskID, r.cfg.Holder)
	case errors.Is(err, errUnshown):
		// The job's end is saved, and stands: the reconcile pass shows
		// it on the task (see end).
		r.log.Warn("agent: the job ended, its task's write failed; the reconcile pass makes it", "task", taskID, "err", err)
	case err != nil:
		// Not the model's doing (the database, the executor): the job
		// waits for a human rather than being claimed again and again.
		r.log.Error("agent: job failed", "task", taskID, "err", err)
		bg := context.WithoutCancel(ctx)
		// The error (a database's may name its address) is the
		// operator's, in the job's reason; the requester is told only
		// that the node failed.
		if jr.j == nil || jr.stuckShowing(bg, "the node could not go on with the job: "+cut(err.Error(), 500), "the node could not go on with the job; its operator has the reason") != nil {
			_ = r.cfg.Store.Release(bg, taskID, r.cfg.Holder)
		}
	}
	if jr.j != nil && jr.j.Status.Terminal() {
		// Ended other than in success (canceled, halted, its task
		// failed): the work its model started elsewhere is canceled, if
		// the write of the end gave its record up (Store.KeepSent).
		r.cancelElsewhere(context.WithoutCancel(ctx), taskID)
	}
}

// start loads the job and its task, finishes a step a crash interrupted,
// and marks the job running and its task working. It reports false when
// there is nothing to do.
func (jr *jobRun) start(ctx context.Context, taskID string) (bool, error) {
	r := jr.r
	j, err := r.cfg.Store.Get(ctx, taskID)
	if err != nil {
		return false, err
	}
	jr.j = j
	t, err := r.cfg.Tasks.Task(ctx, taskID)
	if err != nil {
		return false, err
	}
	if len(t.History) > 0 {
		jr.req, _ = jobRequestOf(t.History[0]) // an invalid one was refused when the task came
	}
	jr.lim = r.limitsFor(jr.req)
	switch st := t.Status.State; {
	case st.Terminal():
		// Canceled, or finished elsewhere: the task's word stands.
		j.Status, j.Reason = statusOfTask(st), "the task is "+string(st)
		if err := jr.save(ctx, nil); err != nil {
			return false, err
		}
		return false, r.cfg.Store.Settle(ctx, taskID, j.Status)
	}
	if jr.its, err = r.cfg.Store.Interactions(ctx, taskID); err != nil {
		return false, err
	}
	if j.Status == Pending && len(jr.its) > 0 {
		jr.fresh = len(jr.its) // resumed by the requester or an operator
	}
	// The queue stored the description through the runtime's redaction;
	// a job queued before a runtime was made on the queue (or by an
	// older version, with the built-in patterns only) is redacted now.
	j.Description = r.redact(j.Description)
	j.Status, j.Shown = jr.phaseStatus(), ""
	if err := jr.save(ctx, nil); err != nil {
		return false, err
	}
	if t.Status.State != tasks.StateWorking {
		if err := ensureWorking(ctx, r.cfg.Tasks, taskID, "the agent is working on the task"); err != nil {
			return false, err
		}
	}
	if n := len(jr.its); n > 0 {
		last := &jr.its[n-1]
		if last.Response.Kind == KindProposal && last.Observation == nil {
			// The node stopped between the model's answer and its
			// observation: the executor's record tells whether the
			// action ran.
			if stop, err := jr.finishInterrupted(ctx, last); err != nil || stop {
				return false, err
			}
		}
	}
	// An action still held was not decided: the job goes on because the
	// requester wrote again. It is withdrawn (denied, so it never runs
	// and no operator approves what is no longer asked), and the model is
	// told.
	held, err := r.cfg.Executor.Pending(ctx, taskID)
	if err != nil {
		return false, err
	}
	for _, pa := range held {
		res, err := r.cfg.Executor.Deny(ctx, pa.ActionID, executor.Host, "withdrawn: the requester wrote again before an operator decided")
		if errors.Is(err, executor.ErrNoPending) {
			continue // an operator decided meanwhile: their decision stands
		}
		if err != nil {
			return false, err
		}
		if err := r.settleHeld(ctx, taskID, res, ObsDenied); err != nil {
			return false, err
		}
		r.settleChanges(ctx, taskID, proposals.Settled(pa.ActionID, pa.Diff, res, proposals.SettledWithdrawn))
		note := fmt.Sprintf("Your action %s (%s) waited for an operator and was withdrawn when the requester wrote again; propose it again if it is still needed.", pa.ActionID, pa.Action)
		if _, err := r.cfg.Store.AddInput(ctx, taskID, note, false, r.cfg.Now()); err != nil {
			return false, err
		}
	}
	if len(held) > 0 {
		if jr.its, err = r.cfg.Store.Interactions(ctx, taskID); err != nil {
			return false, err
		}
	}
	return true, nil
}

func statusOfTask(st tasks.State) Status {
	switch st {
	case tasks.StateCompleted:
		return Success
	case tasks.StateCanceled:
		return Canceled
	}
	return HaltedTime
}

// run is the loop: one model call a step, until the job ends, waits for a
// human, or ctx ends.
func (jr *jobRun) run(ctx context.Context, taskID string) error {
	ok, err := jr.start(ctx, taskID)
	if err != nil || !ok {
		return err
	}
	r := jr.r
	for {
		if ctx.Err() != nil {
			return nil
		}
		if stop, err := jr.checkLimits(ctx); stop || err != nil {
			return err
		}
		if pattern, why := detectStuck(jr.window()); pattern != "" {
			// Input no model call was told yet (a requester's message
			// since the last answer, here or before this claim) is told
			// first: the job waits only once its model saw everything,
			// and a message that comes after this read finds it
			// waiting, or resumes it (Save.Seen). Told, the message is
			// consumed, so a job the check finds stuck again waits.
			pending, end, _, _, err := r.cfg.Store.StepInput(ctx, taskID)
			if err != nil {
				return err
			}
			if pending == "" {
				jr.seen = &end
				return jr.stuck(ctx, fmt.Sprintf("stuck (%s): %s", pattern, why))
			}
			r.log.Info("agent: the job looks stuck, but its model is told the input it was not told yet first",
				"task", taskID, "pattern", pattern)
		}
		if err := jr.rotate(ctx); err != nil {
			return err
		}
		it, comp, err := jr.call(ctx)
		if err != nil {
			if ctx.Err() != nil {
				// Canceled or stopping: the call is not recorded as the
				// model's failure. Canceled, it is the step the job gave
				// up, written with the job's end (see work); the node
				// stopping, the step is made again when the job is taken
				// up.
				if it != nil && errors.Is(context.Cause(ctx), ErrCanceled) {
					it.Response.Kind, it.Response.Status = KindCanceled, ResponseError
					it.Response.Error = cut(r.redact("the task was canceled during the call: "+err.Error()), 1000)
					jr.givenUp = it
				}
				return nil
			}
			if stop, err := jr.apiFailure(ctx, it, err); stop || err != nil {
				return err
			}
			continue
		}
		ans, aerr := parseModelAnswer(comp.Text, r.cfg.MaxAnswerBytes)
		if aerr != nil && len(comp.ToolCalls) > 0 {
			// The model chose a tool (OpenAI, vLLM and Ollama answer so,
			// with a null or empty content): told that its answer was
			// empty, it calls the tool again.
			aerr = toolCallError(r.redact, comp.ToolCalls)
		} else if aerr != nil {
			if terr := thinkingError(comp, r.cfg.MaxTokens, jr.reviewing()); terr != nil {
				// A thinking model that sent its reasoning and no
				// answer: told only that its answer was empty (or not
				// JSON), neither it nor the operator learns why.
				r.log.Warn("agent: the model sent its reasoning and no answer", "task", jr.j.TaskID, "step", it.Sequence,
					"truncated", comp.Truncated, "reason", terr.Message)
				aerr = terr
			}
		}
		if aerr != nil && comp.Truncated && aerr.Rule != "reasoning" {
			// The server stopped the answer at its cap (finish_reason
			// "length"): told only that its JSON ends early, the model
			// sends it again as long, and the operator learns nothing
			// of max_tokens.
			aerr = &AnswerError{Rule: aerr.Rule, Message: fmt.Sprintf(
				"it was cut at the answer's token cap (agent.max_tokens, %d tokens) before it ended; send a shorter one: %s",
				r.cfg.MaxTokens, aerr.Message)}
		}
		if aerr != nil && comp.Filtered {
			// The provider's filter withheld or cut the answer: told
			// only that it was empty or ended early, neither the model
			// nor the operator learns why.
			r.log.Warn("agent: the model server's content filter withheld or cut the answer", "task", jr.j.TaskID, "step", it.Sequence)
			aerr = &AnswerError{Rule: aerr.Rule, Message: `the model server's content filter withheld or cut it (finish_reason "content_filter"): ` + aerr.Message}
		}
		if aerr != nil {
			if stop, err := jr.invalid(ctx, it, aerr); stop || err != nil {
				jr.keepUnwritten(ctx, it)
				return err
			}
			continue
		}
		// The action is kept beside the answer, whose stored text is
		// redacted: so is it (a model may write a secret anywhere).
		it.Response.Kind, it.Response.Action = ans.Kind, r.redact(ans.Action)
		if jr.lim.maxCost > 0 && jr.j.CostCents > jr.lim.maxCost {
			// Paid for, recorded, but not acted on.
			it.Observation = &Observation{Outcome: ObsNone, Reason: "the cost limit was reached; the answer was not acted on"}
			if err := jr.record(ctx, it); err != nil {
				return err
			}
			_, err := jr.checkLimits(ctx)
			return err
		}
		var stop bool
		if jr.reviewing() {
			stop, err = jr.verdict(ctx, it, ans)
		} else if ans.Kind == KindProposal {
			stop, err = jr.propose(ctx, it, ans)
		} else {
			stop, err = jr.respond(ctx, it, ans)
		}
		if stop || err != nil {
			jr.keepUnwritten(ctx, it)
			return err
		}
	}
}

// keepUnwritten keeps it, the step of this call, as the step the job's
// cancel gave up (written with the job's end, see work) when the cancel
// stopped it before it was written: its sequence is still the job's
// next. What the step's way made of it (an answer COMPLETED, STUCK or
// held, whose write of the job's new status failed; a proposal the
// executor did not take) had no effect: an answer is recorded as not
// acted on.
func (jr *jobRun) keepUnwritten(ctx context.Context, it *Interaction) {
	if !errors.Is(context.Cause(ctx), ErrCanceled) || it.Sequence != jr.j.NextSeq || (jr.givenUp != nil && jr.givenUp != it) {
		return
	}
	if it.Response.Status == ResponseSuccess && (it.Response.Kind == KindProposal || it.Response.Kind == KindAgentResponse) {
		it.Observation = notActedOn()
	}
	jr.givenUp = it
}

// notActedOn is the observation of an answer the job's cancel left
// unacted on: it had no effect.
func notActedOn() *Observation {
	return &Observation{Outcome: ObsNone, Reason: "the task was canceled; the answer was not acted on"}
}

// phase is the history of the current phase: the interactions since the
// last recovery point (or RETRY).
func (jr *jobRun) phase() []Interaction {
	from := 0
	for from < len(jr.its) && jr.its[from].Sequence < jr.j.RecoverySeq {
		from++
	}
	return jr.its[from:]
}

// maxGuidance bounds what an earlier message of the requester or an
// operator takes in the prompt: always kept, it must not fill it.
const maxGuidance = 2048

// window is the phase's interactions this claim judges the job by: those
// since the job last resumed on a human's input.
func (jr *jobRun) window() []Interaction {
	p := jr.phase()
	if skip := len(p) - (len(jr.its) - jr.fresh); skip > 0 {
		return p[skip:]
	}
	return p
}

// call makes the next model call. The interaction it returns is new (not
// stored yet), with the request and, when the call succeeded, the
// response's raw text, cost and timing already counted in the job.
func (jr *jobRun) call(ctx context.Context) (*Interaction, *Completion, error) {
	r, j := jr.r, jr.j
	// What the requester or an operator said since the last step: a
	// message of the requester's whose hand-over failed too, which the
	// last step's read of the task (propose) gave the job, or, for a
	// claim's first call and after a step that ran nothing, this read.
	if !jr.caught {
		if t, err := r.cfg.Tasks.Task(ctx, j.TaskID); err == nil {
			r.catchUp(ctx, j, t)
		}
	}
	jr.caught = false
	pending, end, sent, told, err := r.cfg.Store.StepInput(ctx, j.TaskID)
	if err != nil {
		return nil, nil, err
	}
	jr.seen = &end
	// Messages a follow-up's Take told the job count as given: catchUp
	// compares the task's messages with this count.
	j.Told = max(j.Told, told)
	j.PendingInput = pending
	msgs := jr.prompt(ctx)
	role, model, modelName := jr.turn()
	it := &Interaction{Sequence: j.NextSeq, Timestamp: r.cfg.Now().UTC(), StateBefore: j.Status,
		WorkspacePath: "/sandbox/", Guidance: j.PendingInput, guidanceEnd: end,
		Request: Request{Messages: msgs, FilesContext: jr.files, Metadata: RequestMetadata{Role: role, Phase: j.Phase,
			Model: modelName, Temperature: r.cfg.Temperature, MaxTokens: r.cfg.MaxTokens}}}
	// The store keeps what these messages add to the last call's.
	for i := len(jr.its) - 1; i >= 0; i-- {
		if prev := &jr.its[i]; len(prev.Request.Messages) > 0 {
			it.base, it.baseSeq = prev.Request.Messages, prev.Sequence
			break
		}
	}
	// No longer than the job has left: at its time limit it halts.
	timeout, capped := r.cfg.RequestTimeout, false
	var cause error // nil: context.Cause is the deadline itself
	if left := jr.timeLeft(); left < timeout {
		timeout, capped, cause = left, true, ErrTimeLimit
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, cause)
	defer cancel()
	began := time.Now()
	comp, err := model.Complete(cctx, Prompt{Messages: msgs, Schema: answerSchema(), SchemaName: "snapnode_answer",
		Temperature: r.cfg.Temperature, MaxTokens: r.cfg.MaxTokens, Job: jr.request(msgs[0].Content), Step: it.Sequence,
		Sent: sent.Record, SentAnswered: sent.Answered, KeepSent: func(ctx context.Context, b []byte) error { return r.cfg.Store.KeepSent(ctx, j.TaskID, r.cfg.Holder, b) },
		KeepSentCanceling: func(ctx context.Context, b, cancel []byte) error {
			return r.cfg.Store.KeepSentCanceling(ctx, j.TaskID, r.cfg.Holder, b, cancel)
		}})
	elapsed := time.Since(began)
	took := elapsed.Seconds()
	it.Response.ExecutionTimeSeconds = took
	j.Seconds += took
	j.Steps++
	if err != nil {
		it.Response.Kind, it.Response.Status, it.Response.Error = KindAPIError, ResponseError, cut(r.redact(err.Error()), 1000)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			it.Response.Status = ResponseTimeout
		}
		if capped && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			jr.timeUp() // cut at the limit
		}
		usd := 0.0
		if ae := (*AnsweredError)(nil); errors.As(err, &ae) && ctx.Err() == nil {
			// The server answered, and was refused: the call counts
			// against the budget all the same, or a server that only
			// ever answered so would cost the job nothing.
			usd = jr.charge(it, msgs, ae.PromptTokens, ae.CompletionTokens, ae.AnswerBytes)
		}
		if r.cfg.Observer != nil && ctx.Err() == nil {
			r.cfg.Observer.ObserveModelCall(it.Response.Status, elapsed, usd*100)
		}
		return it, nil, err
	}
	// The reasoning the server sent beside the content is answer
	// tokens too (a <think> block is in the text): all of it, not the
	// part kept.
	usd := jr.charge(it, msgs, comp.PromptTokens, comp.CompletionTokens, len(comp.Text)+max(comp.ReasoningBytes, len(comp.Reasoning)))
	if r.cfg.Observer != nil {
		r.cfg.Observer.ObserveModelCall(ResponseSuccess, elapsed, usd*100)
	}
	it.Response.Status, it.Response.RawResponse = ResponseSuccess, r.redact(comp.Text)
	// The lines a worker wrote for past steps, skipped during this one:
	// the steps they named, not the lines (bounded as the pool bounds
	// them).
	it.Response.LateLines = slices.Clone(comp.LateLines[:min(len(comp.LateLines), MaxLateLines)])
	it.Response.Redacted = it.Response.RawResponse != comp.Text
	// The model's reasoning for the step, for the history alone (the
	// prompt never shows it): redacted, then cut.
	it.Response.Reasoning = cut(r.redact(completionReasoning(comp)), MaxReasoningBytes-len("…"))
	if comp.Model != "" {
		// The server's text, like its answer: redacted, then cut (a
		// name in every step's history, which the server could make
		// as long as its response).
		it.Request.Metadata.Model = cut(r.redact(comp.Model), maxModelName)
	}
	return it, comp, nil
}

// completionReasoning is the reasoning a completion carries: what the server
// sent beside the content, or else the <think> block the content opens
// with (closed or not).
func completionReasoning(comp *Completion) string {
	if strings.TrimSpace(comp.Reasoning) != "" {
		return strings.TrimSpace(comp.Reasoning)
	}
	thought, _, _, _ := splitThought(comp.Text)
	return thought
}

// thinkingError is the refusal of a thinking model's completion that
// holds its reasoning and no answer (nil for any other): the server
// stopped it at maxTokens before it wrote one, or it wrote none after its
// reasoning (a chat template or reasoning parser that took the answer
// into the reasoning, as happens with some models on Ollama). A <think>
// block that never closes but was not cut is parseModelAnswer's refusal.
// supervisor: the job is in review, so the setting named is the
// supervisor's (agent.review_reasoning_effort).
func thinkingError(comp *Completion, maxTokens int, supervisor bool) *AnswerError {
	_, _, block, closed := splitThought(comp.Text)
	if strings.TrimSpace(comp.Reasoning) == "" && !block || strings.Trim(answerText(comp.Text), jsonSpace) != "" {
		return nil
	}
	effort := "agent.reasoning_effort"
	if supervisor {
		effort = "agent.review_reasoning_effort"
	}
	switch {
	case comp.Truncated:
		return &AnswerError{Rule: "reasoning", Message: fmt.Sprintf(
			"the model spent its whole token budget thinking: the server stopped it at the answer's token cap (agent.max_tokens, %d tokens) before it wrote any answer after its reasoning; raise agent.max_tokens or turn the model's thinking off or down (%s) (think briefly, then send the JSON object)",
			maxTokens, effort)}
	case block && !closed:
		return nil
	}
	return &AnswerError{Rule: "reasoning", Message: "the model sent only its reasoning and an empty answer: the JSON object must come after its reasoning, in the message's content; if this goes on, turn the model's thinking off or check the server's reasoning parser and chat template"}
}

// maxModelName bounds the model a server names in its response, as each
// step's history keeps it, in bytes (less the mark of a cut).
const maxModelName = 200

// charge counts a model call the server answered in the job and in it,
// its step: the server's usage (promptTokens, answerTokens) and its cost,
// priced at no less than the least the prompt (msgs) and the answer of
// answerBytes (its reasoning included) can be, or at their estimate when
// the server reported no usage (pricedTokens). It returns the cost in US
// dollars.
func (jr *jobRun) charge(it *Interaction, msgs []ChatMessage, promptTokens, answerTokens, answerBytes int) float64 {
	r, j := jr.r, jr.j
	if promptTokens < 0 || answerTokens < 0 {
		// A server's bug, or a lie: a negative count would lower the
		// job's cost and lift its limit. It counts as nothing.
		r.log.Warn("agent: the model server reported negative token counts; counted as 0", "task", j.TaskID,
			"prompt_tokens", promptTokens, "completion_tokens", answerTokens)
		promptTokens, answerTokens = max(promptTokens, 0), max(answerTokens, 0)
	}
	promptPriced, answerPriced := promptTokens, answerTokens
	if r.cfg.PricePerMTokPrompt > 0 || r.cfg.PricePerMTokAnswer > 0 {
		promptPriced, answerPriced = pricedTokens(msgs, promptTokens, answerTokens, answerBytes)
		if promptPriced != promptTokens || answerPriced != answerTokens {
			r.log.Warn("agent: the model server reported no token usage, or less than the call's text holds; the call is priced at an estimate", "task", j.TaskID,
				"reported_prompt_tokens", promptTokens, "reported_completion_tokens", answerTokens,
				"prompt_tokens", promptPriced, "completion_tokens", answerPriced)
		}
	}
	usd := (float64(promptPriced)*r.cfg.PricePerMTokPrompt + float64(answerPriced)*r.cfg.PricePerMTokAnswer) / 1e6
	it.Response.CostUSD = usd
	it.Response.PromptTokens, it.Response.CompletionTokens = promptTokens, answerTokens
	j.CostCents += usd * 100
	j.PromptTokens = addTokens(j.PromptTokens, promptTokens)
	j.CompletionTokens = addTokens(j.CompletionTokens, answerTokens)
	return usd
}

// prompt is the next call's messages within the context budget.
func (jr *jobRun) prompt(ctx context.Context) []ChatMessage {
	r, j := jr.r, jr.j
	system := builtinPrompt()
	switch {
	case jr.reviewing():
		system = supervisorPrompt
	case r.cfg.Review:
		system += reviewedNote
	}
	if r.cfg.SystemPrompt != "" {
		system += "\n\n" + r.cfg.SystemPrompt
	}
	var steps []step
	// What the requester and operators said in earlier phases stays.
	for _, it := range jr.its[:len(jr.its)-len(jr.phase())] {
		if it.Guidance != "" {
			steps = append(steps, step{guidance: cut(it.Guidance, maxGuidance)})
		}
	}
	for _, it := range jr.phase() {
		if it.Response.Kind == KindAPIError || it.Response.Kind == KindCanceled {
			continue
		}
		// The model's earlier answers are shown without their
		// reasoning, as a thinking model's chat template does.
		answer := answerText(it.Response.RawResponse)
		if it.Response.Kind == KindInvalid {
			// A refused answer is shown only so far as the model needs
			// to see what it sent: one over max_answer_bytes (up to the
			// server's whole response) would otherwise come back whole,
			// as the last step always does, past the prompt's budget.
			answer = fitText(answer, maxGuidance)
		}
		s := step{guidance: cut(it.Guidance, maxGuidance), answer: answer, think: isThink(it)}
		if it.Observation != nil {
			s.feedback = it.Observation.Text
			if len(s.feedback) > 512 {
				s.condensed = condenseText(it.Response.Action, it.Observation.Outcome, len(s.feedback), shortHash(s.feedback))
			}
		}
		steps = append(steps, s)
	}
	_, _, name := jr.turn()
	jr.builtFor = r.contextFor(name)
	budget := max(int(float64(jr.builtFor-r.cfg.MaxTokens)*jr.shrink), minPromptTokens)
	task, files := jr.taskMessage(ctx, budget)
	if jr.reviewing() {
		task, files = jr.reviewMessage(ctx, budget)
	}
	if jr.shrink < 1 {
		// The task message is the job's first, kept as it was: refused
		// as too long, it is cut as the budget was (its end first: the
		// context files, after the task's text), or a refusal at the
		// first step would send the same prompt again.
		task = fitText(task, max(int(float64(len(task))*jr.shrink), maxGuidance))
	}
	jr.files = files
	// What the requester or an operator said since the last call takes
	// at most a quarter of the budget (four bytes a token), its newest
	// kept; the whole is in the task's history.
	return buildMessages(system, task, steps, fitNewest(r.redact(j.PendingInput), budget), budget)
}

// fitNewest is s, texts joined by separator, cut to at most about max
// bytes keeping the newest, as the pending input's bound and the prompt's
// cut of earlier guidance do: the oldest texts are left out with a note;
// when the newest alone is too long, its front is kept (fitText).
func fitNewest(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := func(n int) string {
		return fmt.Sprintf("[%d earlier bytes left out to fit the model's context; the newest follow]", n)
	}
	room := max(0, n-len(note(len(s)))-len(separator))
	for from := 0; ; {
		i := strings.Index(s[from:], separator)
		if i < 0 {
			// The newest text alone is past room.
			return note(from) + separator + fitText(s[from:], room)
		}
		from += i + len(separator)
		if len(s)-from <= room {
			return note(from) + separator + s[from:]
		}
	}
}

// fitText is s cut to at most max bytes, the cut said in the text.
func fitText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return cut(s, max) + fmt.Sprintf("\n[%d more bytes left out to fit the model's context]", len(s)-max)
}

// taskMessage is the prompt's first user message: the task and the
// workspace as it was when the job began. It is made once and then read
// from the first interaction, so every call of a job starts with the same
// text (model servers reuse the cached prefix).
func (jr *jobRun) taskMessage(ctx context.Context, budget int) (string, []string) {
	if len(jr.its) > 0 && len(jr.its[0].Request.Messages) > 1 {
		return jr.its[0].Request.Messages[1].Content, jr.its[0].Request.FilesContext
	}
	// The context files take at most a quarter of the prompt's budget
	// (four bytes a token), so the task always leaves room for the work.
	// The task's own text (the requester's messages, a job request's
	// system prompt) and the workspace take at most half of it: however
	// long the requester wrote, the prompt stays within the bound.
	files, text := jr.contextFiles(ctx, budget)
	// Redacted before it is cut: a secret the cut would split is gone
	// whole.
	return fitText(jr.r.redact(taskText(jr.j.Requester, jr.texts(), jr.workspace(ctx))), 2*budget) + jr.r.redact(text), files
}

// Bounds of the context files: the workspace files a task names, whose
// text goes with the task so the model need not ask for it.
const maxContextFiles = 5

// contextFiles reads the workspace files the task's text names (notes.md,
// /sandbox/docs/plan.txt), through the executor as the requester (a file
// the policy does not let the requester read stays out): at most
// maxContextFiles text files of at most MaxObservationBytes each, and
// budget bytes in all. It returns their paths and the text that shows
// them.
func (jr *jobRun) contextFiles(ctx context.Context, budget int) ([]string, string) {
	var (
		paths []string
		b     strings.Builder
	)
	names := fileNames.FindAllString(jr.j.Description, 20)
	if jr.req != nil {
		names = append(slices.Clone(jr.req.ContextFiles), names...)
	}
	for _, name := range names {
		p := "/sandbox/" + strings.TrimPrefix(strings.TrimPrefix(name, "/sandbox/"), "/")
		if slices.Contains(paths, p) || len(paths) == maxContextFiles || b.Len() >= budget {
			continue
		}
		content, size, ok := jr.readText(ctx, p, min(jr.r.cfg.MaxObservationBytes, budget-b.Len()))
		if !ok {
			continue
		}
		paths = append(paths, p)
		fmt.Fprintf(&b, "\nThe file %s (%d bytes) holds:\n%s\n", p, size, content)
	}
	return paths, b.String()
}

// fileNames matches what looks like a file name in a task's text.
var fileNames = regexp.MustCompile(`(?:/sandbox/)?[A-Za-z0-9_][A-Za-z0-9_./-]*\.[A-Za-z0-9]{1,8}\b`)

// texts are the task's request: its first message (the job's
// description), as stored.
func (jr *jobRun) texts() []string {
	if jr.req != nil && jr.req.SystemPrompt != "" {
		return []string{jr.j.Description, "\n" + requesterContext(jr.req.SystemPrompt)}
	}
	return []string{jr.j.Description}
}

// workspaceNames bounds the workspace's entries the model is shown.
const workspaceNames = 50

// workspace lists the top of the sandbox for the model: the first
// workspaceNames entries by name, and how many others there are. The
// executor reads only those (executor.Request.ListFirst), so a workspace
// of any size costs the same and is never refused as too large.
func (jr *jobRun) workspace(ctx context.Context) string {
	out, ok := jr.hostRead(ctx, "LIST_FILES", "/sandbox/", workspaceNames)
	if !ok {
		return ""
	}
	var list struct {
		Result executor.ListResult `json:"result"`
	}
	if json.Unmarshal(out, &list) != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range list.Result.Entries {
		// A name no proposal can use (put there by another process) is
		// shown quoted, with the rule it breaks: a newline or a bidi
		// override in it would otherwise write lines of its own into the
		// task's text.
		if e.Invalid != "" {
			fmt.Fprintf(&b, "%s (%s", strconv.QuoteToASCII(e.Path), e.Kind)
		} else {
			fmt.Fprintf(&b, "%s (%s", e.Path, e.Kind)
		}
		if e.Kind == "file" {
			fmt.Fprintf(&b, ", %d bytes", e.Size)
		}
		if e.Invalid != "" {
			fmt.Fprintf(&b, "; no action can name it: %s", string(e.Invalid))
		}
		b.WriteString(")\n")
	}
	if list.Result.More > 0 {
		fmt.Fprintf(&b, "… and %d more\n", list.Result.More)
	}
	if len(list.Result.Entries) == 0 && list.Result.More == 0 {
		b.WriteString("(nothing)\n")
	}
	return b.String()
}

// hostRead reads for the model's prompt or the task's evidence, as the
// requester: a READ_FILE or LIST_FILES proposal through the executor, so
// the operator's policy decides and the audit log records it, exactly as
// if the model had asked. A listing is cut to its first listFirst entries
// when above 0 (executor.Request.ListFirst). It returns the runtime output
// of a read that was carried out.
func (jr *jobRun) hostRead(ctx context.Context, action, path string, listFirst int) (json.RawMessage, bool) {
	prop, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
		"reasoning": "the node reads this for the agent's work on the task", "action": action,
		"args": map[string]any{"path": path}})
	res, err := jr.r.cfg.Executor.Run(ctx, executor.Request{TaskID: jr.j.TaskID, Requester: jr.j.Requester, Data: prop, ListFirst: listFirst})
	if err != nil {
		return nil, false
	}
	if res.Outcome == executor.NeedsConfirmation {
		// The policy wants an operator for this read: the node does
		// without it rather than leave a held action of its own on the
		// task (an operator approving the task's action must find the
		// model's, not this one).
		_, _ = jr.r.cfg.Executor.Deny(ctx, res.ActionID, executor.Host, "the node's own read for the agent's context is left out when it needs confirmation")
		return nil, false
	}
	if res.Outcome != executor.Completed {
		return nil, false
	}
	return res.Output, true
}

// readText is the content of a text file read through hostRead, with
// what a reader cannot see written as escapes (invisible.EscapeText, as an
// observation of the file shows it), and the file's size; false when it
// cannot be read, is not text, or takes more than max bytes so written.
func (jr *jobRun) readText(ctx context.Context, path string, max int) (text string, size int, ok bool) {
	out, ok := jr.hostRead(ctx, "READ_FILE", path, 0)
	if !ok {
		return "", 0, false
	}
	var read struct {
		Result executor.ReadResult `json:"result"`
	}
	if json.Unmarshal(out, &read) != nil || read.Result.Encoding != "" || len(read.Result.Content) > max {
		return "", 0, false
	}
	text = invisible.EscapeText(read.Result.Content)
	if len(text) > max {
		return "", 0, false
	}
	return text, len(read.Result.Content), true
}

// refusedForGood says why a failed model call of role (RoleWorker,
// RoleSupervisor) cannot succeed if asked again, and what the operator
// should check (of role's settings), or "" when it may: the server's
// refusal that is not transient (me, ModelError.Transient), or
// a TLS certificate this machine does not verify (another authority,
// another name than agent.llm_url's host, expired), which every
// handshake meets alike.
func refusedForGood(me *ModelError, err error, role string) string {
	if me != nil && !me.Transient() {
		return fmt.Sprintf("the model server refused the request (HTTP %d), which asking again does not mend; %s", me.Status, me.advice(role))
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return fmt.Sprintf("the model server's TLS certificate does not verify (%v), which asking again does not mend; check that agent.llm_url names the host the certificate is for, and that this machine trusts its authority (the system's certificates, or SSL_CERT_FILE in the node's environment)", cert.Err)
	}
	return ""
}

// minPromptTokens is the least budget, in tokens, a prompt is built
// for, however small the context.
const minPromptTokens = 512

// contextLengthMark starts the recorded error of a model call refused
// because the prompt was longer than the model's context.
const contextLengthMark = "the prompt is over the model's context: "

// serverContextMark starts the recorded error of a model call refused
// because the prompt was longer than the context the server named, a
// smaller one than the prompt was built for: the next prompts are built
// for the server's.
const serverContextMark = "the prompt is over the model server's context, which the next prompts are built for: "

// apiFailure records a failed model call and decides: retry after a
// backoff (doubling, the server's Retry-After when longer, each wait at
// most MaxRetryWait), shrink
// the prompt after a context-length error, or, past the retries or at a
// refusal that is not transient (ModelError.Transient), STUCK.
func (jr *jobRun) apiFailure(ctx context.Context, it *Interaction, callErr error) (bool, error) {
	r := jr.r
	var me *ModelError
	ctxLen := errors.As(callErr, &me) && me.ContextLength
	// The server named its context, smaller than the one the prompt was
	// built for: the next prompts are built for the server's, and the
	// first such refusal of a run of failures is not counted against
	// condensing (see below). A context too small for the answer's cap
	// and the smallest prompt is not taken: every prompt built for it
	// would be refused all the same, and it would hold every job's
	// prompts to the floor.
	named := 0
	if ctxLen && me.ContextTokens >= r.cfg.MaxTokens+minPromptTokens {
		named = me.ContextTokens
	}
	smaller := named > 0 && named < jr.builtFor
	switch {
	case smaller:
		_, _, name := jr.turn()
		r.lowerBudget(name, named)
		it.Response.Error = cut(fmt.Sprintf("%s%d tokens, the prompt built for %d: ", serverContextMark, named, jr.builtFor)+it.Response.Error, 1000)
	case ctxLen:
		// Marked in the history, which the count below reads (the
		// server's own words vary, and "context" is in a time-out's).
		it.Response.Error = cut(contextLengthMark+it.Response.Error, 1000)
	}
	it.Response.NewStatus = jr.j.Status
	if err := jr.record(ctx, it); err != nil {
		return true, err
	}
	fails, ctxFails, lowered := 0, 0, 0
	for i := len(jr.its) - 1; i >= jr.fresh && jr.its[i].Response.Kind == KindAPIError; i-- {
		fails++
		switch e := jr.its[i].Response.Error; {
		case strings.HasPrefix(e, contextLengthMark):
			ctxFails++
		case strings.HasPrefix(e, serverContextMark):
			lowered++
		}
	}
	// Only the first refusal naming a smaller context goes uncounted: a
	// server that names a smaller one at each refusal (broken, or
	// hostile) would otherwise be asked again at once, step after step.
	ctxFails += max(lowered-1, 0)
	if jr.timeLeft() <= 0 {
		// The call ran to the job's time limit (a worker stopped there
		// did not fail): the job halts at its next step (checkLimits).
		return false, nil
	}
	if jr.lim.maxCost > 0 && jr.j.CostCents >= jr.lim.maxCost {
		// A refused answer was counted (AnsweredError) and reached the
		// cost limit: the job halts at its next step, without a wait.
		return false, nil
	}
	// The model's errors stay with the operator (the job's reason, its
	// history, the log): a model server's may name its address, a
	// worker's its command and its error output, which the task's
	// requester is not told.
	if errors.Is(callErr, ErrWorkerFailed) {
		// The worker was stopped: retrying would start it again.
		return true, jr.stuckShowing(ctx, it.Response.Error, "the worker failed and was stopped; the node's operator has its reason")
	}
	if smaller && lowered == 1 {
		return false, nil
	}
	if ctxLen {
		if ctxFails >= 2 {
			why := fmt.Sprintf("stuck (%s): the model server still refuses the prompt as too long after condensing", PatternContextWindow)
			// The operator is told what bounds the prompt: the setting
			// below what the server takes, or the server's limit (its
			// context, a proxy's body size) above it.
			return true, jr.stuckShowing(ctx, why+"; lower agent.context_tokens (the prompt's bound) to what the server takes, or raise the server's limit (its context size, or the request size a proxy in front of it allows): "+
				it.Response.Error, why)
		}
		jr.shrink /= 2
		return false, nil
	}
	if why := refusedForGood(me, callErr, it.Request.Metadata.Role); why != "" {
		// A refused API key, a model or path the server does not have,
		// an invalid request, a certificate this machine does not
		// trust: asked again, the server (or the handshake) answers the
		// same. The operator is told what to check; the requester, as
		// of an outage, that it is the node's, with the work kept.
		r.log.Error("agent: "+why, "task", jr.j.TaskID, "err", callErr)
		return true, jr.stuckShowing(ctx, why+": "+it.Response.Error,
			"the model server refused the node's request, on the node's side (its operator has the error and what to check); the work so far is kept: send a message to try again, or cancel the task")
	}
	if fails > MaxAPIRetries {
		// An outage of the node's model server is its operator's to
		// mend; the job keeps its work and waits (the seed's
		// escalation: retried 3 times, then a human), and the
		// requester is told what the wait is and that a message tries
		// again (a resumed job has its retries anew), rather than
		// asked for input it cannot give.
		why := fmt.Sprintf("the model server failed %d times in a row", fails)
		r.log.Error("agent: the model server keeps failing; the job waits for a message from its requester or an operator", "task", jr.j.TaskID,
			"attempts", fails, "err", callErr)
		return true, jr.stuckShowing(ctx, why+": "+it.Response.Error, fmt.Sprintf(
			"%s, on the node's side (its operator has the error); the work so far is kept: send a message to try again, or cancel the task", why))
	}
	wait := min(r.cfg.Backoff<<(fails-1), MaxRetryWait)
	// Spread: cut by up to a quarter at random, never lengthened, so the
	// bounds above hold; a server's Retry-After is waited in full.
	wait -= time.Duration(r.cfg.Rand() * float64(wait) / 4)
	if me != nil && me.RetryAfter > wait {
		wait = min(me.RetryAfter, MaxRetryWait)
	}
	// No longer than the job has left: at its time limit it halts.
	left := jr.timeLeft()
	capped := wait >= left
	if capped {
		wait = max(0, left)
	}
	r.log.Warn("agent: model call failed; retrying", "task", jr.j.TaskID, "attempt", fails, "wait", wait, "err", callErr)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true, nil
	case <-t.C:
	}
	// The wait is the job's time too: max_time_minutes bounds how long a
	// job takes, not only its model calls.
	if jr.j.Seconds += wait.Seconds(); capped {
		jr.timeUp()
	}
	return false, nil
}

// toolCallError is the refusal of an answer that called tools (their
// names, as the server gave them) instead of holding a JSON object.
func toolCallError(redact func(string) string, names []string) *AnswerError {
	quoted := make([]string, 0, min(len(names), 4))
	for _, n := range names[:min(len(names), 4)] {
		quoted = append(quoted, fmt.Sprintf("%q", cut(redact(n), 100)))
	}
	what := "the tool " + quoted[0]
	if len(names) > 1 {
		what = fmt.Sprintf("%d tools (%s)", len(names), strings.Join(quoted, ", "))
	}
	return &AnswerError{Rule: "tool_call", Message: "it called " + what +
		" instead of answering: no tool is offered here; write exactly one JSON object (a proposal or an agent response) as the message's content, and call no tool"}
}

// addTokens is the job's total n with a call's count added, saturated at
// math.MaxInt64: a server's count, however large, never wraps the total
// negative.
func addTokens(n int64, count int) int64 {
	n, c := max(n, 0), int64(max(count, 0))
	if c > math.MaxInt64-n {
		return math.MaxInt64
	}
	return n + c
}

// timeLeft is how long the job may still work before max_time halts it
// (checkLimits).
func (jr *jobRun) timeLeft() time.Duration {
	return jr.lim.maxTime - time.Duration(jr.j.Seconds*float64(time.Second))
}

// timeUp counts the job's time as used up: a call or a wait was cut at
// its limit, whatever the rounding of the seconds counted.
func (jr *jobRun) timeUp() { jr.j.Seconds = max(jr.j.Seconds, jr.lim.maxTime.Seconds()) }

// invalid feeds an invalid answer's error back, or after
// MaxInvalidAnswers re-asks makes the job STUCK.
func (jr *jobRun) invalid(ctx context.Context, it *Interaction, aerr *AnswerError) (bool, error) {
	it.Response.Kind, it.Response.Error = KindInvalid, aerr.Message
	it.Observation = &Observation{Outcome: ObsInvalid, Reason: aerr.Message,
		Text: "Your answer was refused: " + aerr.Message + ". Answer again with exactly one JSON object: a proposal or an agent response, nothing else."}
	n := 1
	for i := len(jr.its) - 1; i >= jr.fresh && jr.its[i].Response.Kind == KindInvalid; i-- {
		n++
	}
	if n > MaxInvalidAnswers {
		return true, jr.stuckAfter(ctx, it, fmt.Sprintf("the model answered %d times in a row with something that is not a valid answer: %s", n, aerr.Message))
	}
	return false, jr.record(ctx, it)
}

// propose carries a proposal through the executor (validation, policy,
// sandbox, confirmation, audit) on behalf of the task's requester, and
// feeds the observation back. The interaction is stored before the action
// runs, so that a crash in between is finished from the executor's record.
// The step's note on the task (its status event) is written in the
// executor's last commit of the action, when the job goes on after it:
// the action's record and the step the requester sees are durable
// together, in one commit.
func (jr *jobRun) propose(ctx context.Context, it *Interaction, ans *Answer) (bool, error) {
	r, j := jr.r, jr.j
	it.Response.NewStatus = j.Status
	t, err := r.cfg.Tasks.Task(ctx, j.TaskID)
	if err == nil && t.Status.State == tasks.StateCanceled && jr.cancel != nil {
		// Canceled, and the job not told yet (the task's event, or the
		// lease's renewal, comes later; a cancel another process
		// made): the job is canceled now, as it would be then, and the
		// answer goes with its end.
		jr.cancel(ErrCanceled)
	}
	if err != nil || t.Status.State.Terminal() || ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), ErrCanceled) {
			// Answered, paid for, not acted on: written with the job's
			// end (see work).
			it.Observation = notActedOn()
			jr.givenUp = it
			return true, nil
		}
		return true, err // canceled: no action of a canceled job runs
	}
	// The same read gives the job its task's messages it was missing, for
	// the next call (see call).
	r.catchUp(ctx, j, t)
	jr.caught = true
	// The answer is stored in the executor's first commit of the
	// proposal: it is durable exactly when the proposal's reception is,
	// before anything has an effect, only while this process holds the
	// job (a lost lease fails that commit, and nothing runs), and only
	// while the task has not ended (read again in that commit).
	w, done := jr.prepare(it, nil)
	// The notes of earlier steps go first: this one may join the commit.
	jr.flushNotes()
	st := r.cfg.Tasks.Settle(j.TaskID)
	var note string
	began := time.Now()
	res, err := r.cfg.Executor.Run(ctx, executor.Request{TaskID: j.TaskID, Requester: j.Requester, Data: []byte(ans.Object),
		Also: func(ctx context.Context, tx *sql.Tx) error {
			// The task is read again in the commit that lets the action
			// go on, as an operator's approval reads it: the read above
			// may be stale (a cancel another process made after it,
			// whose event never reaches this one), and the action runs
			// before the task ends or not at all.
			if err := st.Unended(ctx, tx); err != nil {
				return err
			}
			return r.cfg.Store.WriteTx(ctx, tx, w)
		},
		// The promotion's record need not wait for the disk: this job's
		// next commit (the next answer's, or the job's own as it stops)
		// waits, and makes it durable, before the job goes anywhere.
		// What a power cut may lose in between is that one commit; the
		// executor's recovery then restores the files and records the
		// action as not applied, and this job reads that as the step's
		// outcome when it is picked up again.
		PromotedNoWait: true,
		Then: func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
			if !goesOn(res) {
				return nil
			}
			note = stepNote(it, outcomeOf(res), res.Output)
			return st.In(ctx, tx, tasks.Outcome{State: tasks.StateWorking, Note: note})
		}})
	j.Seconds += time.Since(began).Seconds()
	if errors.Is(err, tasks.ErrTerminal) {
		// The task ended after the read above (Also's check): nothing
		// of the proposal was stored or ran. Canceled, the answer goes
		// with the job's end, not acted on, as above.
		done(err)
		if t, gerr := r.cfg.Tasks.Task(context.WithoutCancel(ctx), j.TaskID); gerr == nil && t.Status.State == tasks.StateCanceled && jr.cancel != nil {
			jr.cancel(ErrCanceled)
		}
		if errors.Is(context.Cause(ctx), ErrCanceled) {
			it.Observation = notActedOn()
			jr.givenUp = it
		}
		return true, nil
	}
	if err != nil {
		// Run may fail after its first commit (after a promotion it
		// could not record, say): the answer is then stored, and the
		// job's memory must say so, or the next step would take its
		// sequence.
		if cur, gerr := r.cfg.Store.Get(context.WithoutCancel(ctx), j.TaskID); gerr == nil && cur.NextSeq >= j.NextSeq {
			done(nil)
		} else {
			done(err)
		}
		return true, fmt.Errorf("agent: executor: %w", err)
	}
	done(nil)
	if note != "" {
		// Committed with the action: published now.
		if _, err := st.Done(ctx, tasks.Outcome{State: tasks.StateWorking, Note: note}); err != nil && ctx.Err() == nil {
			r.log.Warn("agent: progress", "task", j.TaskID, "err", err)
		}
	}
	return jr.observed(ctx, it, res, note != "")
}

// goesOn reports whether the job goes on to its next step after an
// action with result res: it neither waits for an operator nor finished.
func goesOn(res *executor.Result) bool {
	return res.Outcome != executor.NeedsConfirmation && (res.Outcome != executor.Completed || !strings.EqualFold(res.Action, "FINISH"))
}

// observed applies an executor result to the job: the observation is
// stored with its interaction; FINISH completes the task; a held action
// waits for an operator. noted says the step's note is on the task
// already (propose wrote it with the action).
func (jr *jobRun) observed(ctx context.Context, it *Interaction, res *executor.Result, noted bool) (bool, error) {
	r, j := jr.r, jr.j
	obs := r.redactObservation(observe(res, r.cfg.MaxObservationBytes))
	it.Observation = obs
	switch {
	case res.Outcome == executor.NeedsConfirmation:
		// The executor's line tells the operator (with the command that
		// decides); this one is for following the job.
		r.log.Debug("agent: action held for an operator", "task", j.TaskID, "action", res.ActionID)
		// The operator sees what to confirm on the task.
		note := r.redact(proposals.ConfirmationNote(res))
		return true, jr.stopWith(ctx, it, InterventionRequired, true, note, note, r.actionArtifacts(res))
	case res.Outcome == executor.Completed && strings.EqualFold(res.Action, "FINISH"):
		// FINISH's response is the job's answer, as an agent
		// response's summary is.
		it.Response.SummaryForSupervisor = r.redact(res.Response)
		if r.cfg.Review {
			return jr.submitForReview(ctx, it)
		}
		return true, jr.complete(ctx, it, nil, nil)
	}
	jr.remember(it)
	if !noted {
		jr.progress(ctx, it, obs.Outcome)
	}
	return false, nil
}

// remember keeps it, completed, for the next write.
func (jr *jobRun) remember(it *Interaction) {
	for i := range jr.its {
		if jr.its[i].Sequence == it.Sequence {
			jr.its[i] = *it
		}
	}
	c := *it
	jr.dirty = &c
}

// keepResponse records in it the agent response resp redacted (its
// evidence files and its summary), and returns the summary so redacted.
func (r *Runtime) keepResponse(it *Interaction, resp *AgentResponse) string {
	files := make([]string, len(resp.EvidenceFiles))
	for i, f := range resp.EvidenceFiles {
		files[i] = r.redact(f)
	}
	summary := r.redact(resp.SummaryForSupervisor)
	it.Response.EvidenceFiles, it.Response.SummaryForSupervisor = files, summary
	return summary
}

// respond applies an agent response: COMPLETED ends the job (its evidence
// files become artifacts), STUCK waits for a human, RETRY restarts the
// phase from its last recovery point.
func (jr *jobRun) respond(ctx context.Context, it *Interaction, ans *Answer) (bool, error) {
	r, j := jr.r, jr.j
	resp := ans.Response
	// The summary, redacted, is what every path below keeps: the
	// history, the job's reason, and a RETRY's note queued in the job's
	// row for the next call.
	summary := r.keepResponse(it, resp)
	switch resp.Action {
	case ActionCompleted:
		if r.cfg.Review {
			return jr.submitForReview(ctx, it)
		}
		arts, missing := jr.evidence(ctx, resp.EvidenceFiles)
		obs := &Observation{Outcome: ObsCompleted, Text: "accepted"}
		if len(missing) > 0 {
			obs.Reason = "evidence files not in the workspace: " + strings.Join(missing, ", ")
			r.log.Warn("agent: evidence files missing; answer accepted", "task", j.TaskID, "files", missing)
		}
		it.Observation = obs
		rp, err := jr.recoveryPoint(ctx, it, j.Phase)
		if err != nil {
			return true, err
		}
		return true, jr.complete(ctx, it, rp, arts)
	case ActionStuck:
		return true, jr.stuckAnswered(ctx, it, "the agent is stuck: "+summary)
	default: // RETRY
		if jr.retriesExhausted() {
			return true, jr.stuckRetries(ctx, it, "the agent asked to retry its phase", summary)
		}
		it.Observation = &Observation{Outcome: ObsRetried, Text: "the phase restarts from its beginning"}
		it.Response.NewStatus = j.Status
		j.RecoverySeq = it.Sequence + 1
		note := fmt.Sprintf("You asked to start the phase again (retry %d of %d). What you said then: %s", j.Retries, r.cfg.MaxRetries, summary)
		return jr.restart(ctx, it, note, ObsRetried)
	}
}

// stuckAnswered makes the job wait for the requester's guidance after a
// STUCK answer (the agent's, or the supervisor's), it the step, with
// reason.
func (jr *jobRun) stuckAnswered(ctx context.Context, it *Interaction, reason string) error {
	it.Observation = &Observation{Outcome: ObsNone, Text: "waiting for the requester's guidance"}
	return jr.stuckAfter(ctx, it, reason)
}

// retriesExhausted counts a RETRY of the job's phase (the agent's own, or
// the supervisor's sending the work back) and reports whether it is one
// more than MaxRetries allows.
func (jr *jobRun) retriesExhausted() bool {
	jr.j.Retries++
	return jr.j.Retries > jr.r.cfg.MaxRetries
}

// stuckRetries makes the job wait for a human after a RETRY past
// MaxRetries: it, the step, says so, and the job's reason is what (who
// asked for the retries) with the step's summary.
func (jr *jobRun) stuckRetries(ctx context.Context, it *Interaction, what, summary string) error {
	it.Observation = &Observation{Outcome: ObsNone, Reason: "retries exhausted"}
	return jr.stuckAfter(ctx, it, fmt.Sprintf("%s more than %d times: %s", what, jr.r.cfg.MaxRetries, summary))
}

// restart ends a RETRY that starts a phase again: it records it (its
// observation and the job as the caller set them), queues note for the
// job's next model call and tells the requester the step's outcome. Its
// results are respond's: the run goes on unless it fails.
func (jr *jobRun) restart(ctx context.Context, it *Interaction, note, outcome string) (bool, error) {
	if err := jr.record(ctx, it); err != nil {
		return true, err
	}
	if _, err := jr.r.cfg.Store.AddInput(ctx, jr.j.TaskID, note, false, jr.r.cfg.Now()); err != nil {
		return true, err
	}
	jr.progress(ctx, it, outcome)
	return false, nil
}

// evidence reads the evidence files for artifacts, through the executor as
// the requester (what the policy does not let the requester read counts
// as missing): each file's text when short, else its size and hash; those
// missing or refused are named.
func (jr *jobRun) evidence(ctx context.Context, files []string) (arts []tasks.Artifact, missing []string) {
	for i, f := range files {
		p := f
		if !strings.HasPrefix(p, "/sandbox/") {
			p = "/sandbox/" + strings.TrimPrefix(p, "/")
		}
		if i >= 20 {
			continue // the task's artifacts are bounded; the history names them all
		}
		out, ok := jr.hostRead(ctx, "READ_FILE", p, 0)
		var read struct {
			Result executor.ReadResult `json:"result"`
		}
		if !ok || json.Unmarshal(out, &read) != nil {
			missing = append(missing, jr.r.redact(f))
			continue
		}
		p = jr.r.redact(p) // the artifact's name, as the task shows it
		var part tasks.Part
		if c := read.Result.Content; read.Result.Encoding == "" && len(c) <= jr.r.cfg.MaxObservationBytes {
			part = tasks.TextPart(jr.r.redact(c))
			part.MediaType = "text/plain"
		} else {
			part = tasks.DataPart(fmt.Appendf(nil, `{"path":%q,"size":%d,"sha256":%q}`, p, len(c), shortHash(c)))
		}
		arts = append(arts, tasks.Artifact{ArtifactID: fmt.Sprintf("evidence-%d", i), Name: p, Parts: []tasks.Part{part}})
	}
	return arts, missing
}

// complete ends the job in success: it, the step that ended the job
// (with rp, its recovery point, or nil), recording the answer and, in its
// observation's output, evidence (the evidence files' artifacts as the
// step read them), goes in one write with the job's status and the answer
// as its reason, so that a node stopping after it leaves the restart's
// reconcile the task's completion to make, from the history, as the job
// makes it here (see completion), never the reason the job had before (a
// held action's note). The task is then completed (see end).
func (jr *jobRun) complete(ctx context.Context, it *Interaction, rp *RecoveryPoint, evidence []tasks.Artifact) error {
	r, j := jr.r, jr.j
	if len(evidence) > 0 {
		out, err := json.Marshal(completedOutput{Evidence: evidence})
		if err != nil {
			return err
		}
		it.Observation.Output = out
	}
	j.Status = Success
	it.Response.NewStatus = j.Status
	message, arts := completion(j, withStep(jr.its, it))
	j.Reason = cut(message, 2000) // the answer, should the history not have it
	if err := jr.recordWith(ctx, it, rp); err != nil {
		return err
	}
	r.log.Info("agent: job completed", "task", j.TaskID, "steps", j.Steps, "cost_cents", j.CostCents)
	return jr.end(ctx, Success, message, arts)
}

// withStep is its with it in the place of the step of its sequence, or
// after them; its is left as it is.
func withStep(its []Interaction, it *Interaction) []Interaction {
	out := slices.Clone(its)
	for i := range out {
		if out[i].Sequence == it.Sequence {
			out[i] = *it
			return out
		}
	}
	return append(out, *it)
}

// completedOutput is the observation's output of the answer that
// completed a job (COMPLETED, or a supervisor's COMPLETED): the evidence
// files' artifacts as the host read them for the task, kept in the
// history for completion.
type completedOutput struct {
	Evidence []tasks.Artifact `json:"evidence"`
}

// completion is the note and artifacts the task of job j, which ended in
// success, is completed with, made from its history its: the answer (the
// summary of the step that ended the job or, when a supervisor's review
// did, of the work it accepted; j's reason when the history has none),
// then the artifacts: the answer's, the evidence files' as that step read
// them, the supervisor's review, and the diff of the changes the job's
// steps made, if any. The job's own completion and the reconcile of a
// task whose write did not happen both complete the task so.
func completion(j *Job, its []Interaction) (string, []tasks.Artifact) {
	var end *Interaction
	for i := len(its) - 1; i >= 0 && end == nil; i-- {
		if its[i].Response.NewStatus == Success {
			end = &its[i]
		}
	}
	var (
		message string
		arts    []tasks.Artifact
	)
	if end != nil {
		message = end.Response.SummaryForSupervisor
		if o := end.Observation; o != nil && end.Response.Kind == KindAgentResponse && len(o.Output) > 0 {
			var out completedOutput
			if json.Unmarshal(o.Output, &out) == nil {
				arts = append(arts, out.Evidence...)
			}
		}
		if end.Request.Metadata.Phase == PhaseReview {
			// The supervisor accepted the work its submission
			// describes; its own summary is the review.
			arts = append(arts, tasks.Artifact{ArtifactID: "review", Name: "the supervisor's review", Parts: []tasks.Part{tasks.TextPart(message)}})
			for _, sub := range its {
				if sub.Sequence == j.ReviewSeq {
					message = sub.Response.SummaryForSupervisor
				}
			}
		}
	}
	if message == "" {
		message = j.Reason // a history an older version wrote
	}
	arts = append([]tasks.Artifact{answerArtifact(message)}, arts...)
	if d := changes(its); d != "" {
		p := tasks.TextPart(d)
		p.MediaType = "text/x-diff"
		arts = append(arts, tasks.Artifact{ArtifactID: "changes", Name: "the changes the agent made", Parts: []tasks.Part{p}})
	}
	return message, arts
}

// The tries of the task's write that shows a job's end, and the wait
// before the second, doubling after.
const (
	endTries = 4
	endWait  = time.Second
)

// errUnshown: the job's end is saved, its task's write failed.
var errUnshown = errors.New("agent: the task's write of the job's end failed")

// end shows the job's end, saved in st, on its task with note and arts
// (Runtime.show), and gives the job's lease up (a release that fails is
// logged, the lease left to lapse: see release). A task's write that
// fails (the database busy, or gone for a moment) is made again after a
// wait, doubling, endTries in all while the job has the time and is not
// stopped; failing still, the job stays as it was saved, its task not
// showing it (unsettled): the reconcile pass shows it once the lease is
// given up or lapses, and the error is errUnshown.
func (jr *jobRun) end(ctx context.Context, st Status, note string, arts []tasks.Artifact) error {
	r, j := jr.r, jr.j
	jr.flushNotes()
	err := r.show(ctx, j.TaskID, st, note, arts)
	wait := endWait
	for try := 1; err != nil && try < endTries && wait < jr.timeLeft(); try++ {
		r.log.Warn("agent: the task's write failed; trying again", "task", j.TaskID, "attempt", try, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return jr.release(ctx, fmt.Errorf("%w: %w", errUnshown, err))
		case <-t.C:
		}
		wait *= 2
		err = r.show(ctx, j.TaskID, st, note, arts)
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", errUnshown, err)
	}
	return jr.release(ctx, err)
}

// answerArtifact is the task's artifact with the agent's answer.
func answerArtifact(message string) tasks.Artifact {
	return tasks.Artifact{ArtifactID: "agent-response", Name: "the agent's answer", Parts: []tasks.Part{tasks.TextPart(message)}}
}

// maxChanges bounds the diff of a job's changes left on its task; the
// history keeps every diff.
const maxChanges = 64 << 10

// changes is the diff of every change a job of interactions its made, in
// order, cut to maxChanges.
func changes(its []Interaction) string {
	var b strings.Builder
	for _, it := range its {
		if o := it.Observation; o != nil && o.Diff != "" && (o.Outcome == ObsCompleted || o.Outcome == ObsApproved) {
			if b.Len()+len(o.Diff) > maxChanges {
				fmt.Fprintf(&b, "… (more changes: the job history has every diff)\n")
				break
			}
			b.WriteString(o.Diff)
			if !strings.HasSuffix(o.Diff, "\n") {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// stuck makes the job wait for a human: INTERVENTION_REQUIRED, the task
// input_required with the reason. It is the stop of the stuck check, which
// no step of the model's makes: input added since jr.seen, where the input
// its model was told ended, resumes the job (Save.Seen) as after a step.
func (jr *jobRun) stuck(ctx context.Context, reason string) error {
	return jr.stuckFrom(ctx, nil, true, reason, reason)
}

// stuckShowing makes the job wait for a human, with shown, not reason,
// as what the task's requester is told.
func (jr *jobRun) stuckShowing(ctx context.Context, reason, shown string) error {
	return jr.stuckWith(ctx, nil, reason, shown)
}

// stuckAfter records it, the step that found the job stuck, as the one
// that asks for a human (InterventionRequired), with the job waiting for
// guidance with reason (see stuck).
func (jr *jobRun) stuckAfter(ctx context.Context, it *Interaction, reason string) error {
	return jr.stuckWith(ctx, it, reason, reason)
}

func (jr *jobRun) stuckWith(ctx context.Context, it *Interaction, reason, shown string) error {
	return jr.stuckFrom(ctx, it, it != nil, reason, shown)
}

func (jr *jobRun) stuckFrom(ctx context.Context, it *Interaction, seen bool, reason, shown string) error {
	err := jr.stopWith(ctx, it, InterventionRequired, seen, jr.r.redact(reason), jr.r.redact(shown), nil)
	if jr.j.Status == InterventionRequired {
		jr.r.log.Info("agent: job waits for guidance", "task", jr.j.TaskID, "reason", jr.j.Reason)
	}
	return err
}

// stopWith halts the job (st HALTED_COST or HALTED_TIME) or makes it
// wait for a human (INTERVENTION_REQUIRED): it, the step that did (nil:
// none), st, reason (the job's, the operator's) and shown (what the
// task's requester is told of a wait, when it is not reason) go in one
// write, so that a node stopping after it leaves the reconcile the task's
// write to make as the job makes it here (see ending), never one a later
// write put over it. The task then shows it, with arts after ending's
// (see end). reason and shown are redacted already.
//
// A step that asks for a human (it, with st INTERVENTION_REQUIRED), or
// the stuck check (seen), does not wait when input came since its model
// was last told what it was given (jr.seen; a requester's message while
// the model was being called): as for a message on a job that waits, the job
// is queued again, PENDING (Save.Seen), and goes on with the message
// once claimed; an action the step held is withdrawn then (start).
func (jr *jobRun) stopWith(ctx context.Context, it *Interaction, st Status, seen bool, reason, shown string, arts []tasks.Artifact) error {
	j := jr.j
	reason, shown = cut(reason, 2000), cut(shown, 2000)
	j.Status, j.Reason, j.Shown = st, reason, ""
	if shown != reason {
		j.Shown = shown
	}
	if it != nil {
		it.Response.NewStatus = st
	}
	w, done := jr.prepare(it, nil)
	if st == InterventionRequired && seen {
		w.Seen = jr.seen
	}
	err := jr.r.cfg.Store.Write(ctx, w)
	done(err)
	if err != nil {
		return err
	}
	if j.Status == Pending {
		jr.r.log.Info("agent: the requester wrote during the step; the job goes on with the message rather than waiting",
			"task", j.TaskID, "reason", reason)
		return nil
	}
	note, own := ending(j, jr.its)
	return jr.end(ctx, st, note, append(own, arts...))
}

// checkLimits halts the job at its step, time or cost limit: HALTED_TIME
// (steps count as time) or HALTED_COST, the task failed with the halt in a
// data artifact (see halt).
func (jr *jobRun) checkLimits(ctx context.Context) (bool, error) {
	j := jr.j
	var (
		status   Status
		limit    string
		max, got float64
	)
	switch {
	case jr.lim.maxCost > 0 && j.CostCents >= jr.lim.maxCost:
		status, limit, max, got = HaltedCost, "max_cost_cents", jr.lim.maxCost, j.CostCents
	case j.Steps >= jr.lim.maxSteps:
		status, limit, max, got = HaltedTime, "max_steps", float64(jr.lim.maxSteps), float64(j.Steps)
	case j.Seconds >= jr.lim.maxTime.Seconds():
		status, limit, max, got = HaltedTime, "max_time_minutes", jr.lim.maxTime.Minutes(), j.Seconds/60
	default:
		return false, nil
	}
	reason := fmt.Sprintf("halted (%s): %s reached: %g of at most %g", status, limit, got, max)
	err := jr.stopWith(ctx, nil, status, false, reason, reason, nil)
	jr.r.log.Info("agent: job halted", "task", j.TaskID, "status", status, "reason", j.Reason)
	return true, err
}

// haltReason reads a halt's reason (checkLimits): the limit, its bound
// and what the job reached.
var haltReason = regexp.MustCompile(`^halted \([A-Z_]+\): ([a-z_]+) reached: (\S+) of at most (\S+)$`)

// halt is the note and artifacts the task of job j, halted at a limit,
// fails with, made from the job as its halt saved it (one write): the
// reason, then the artifact "halt" with the limit, its bound and what the
// job reached (read from the reason), and the job's steps and cost. The
// job's own halt and the reconcile of a task whose write did not happen
// both fail the task so.
func halt(j *Job) (string, []tasks.Artifact) {
	data := fmt.Appendf(nil, `{"halt":%q`, j.Status)
	if m := haltReason.FindStringSubmatch(j.Reason); m != nil {
		max, err1 := strconv.ParseFloat(m[3], 64)
		got, err2 := strconv.ParseFloat(m[2], 64)
		if err1 == nil && err2 == nil {
			data = fmt.Appendf(data, `,"limit":%q,"max":%g,"got":%g`, m[1], max, got)
		}
	}
	data = fmt.Appendf(data, `,"steps":%d,"cost_cents":%g}`, j.Steps, j.CostCents)
	return j.Reason, []tasks.Artifact{{ArtifactID: "halt", Name: "why the agent stopped", Parts: []tasks.Part{tasks.DataPart(data)}}}
}

// ending is the note and artifacts the task of job j, which ended or
// waits for a human, shows, made from the job and its history its as the
// write of its status saved them: a success's answer and artifacts (see
// completion), a halt's reason and artifact (see halt), a wait's text for
// the requester (Shown, else the reason). The job and the reconcile of a
// task whose write did not happen both show the task so.
func ending(j *Job, its []Interaction) (string, []tasks.Artifact) {
	switch j.Status {
	case Success:
		return completion(j, its)
	case HaltedCost, HaltedTime:
		return halt(j)
	}
	if j.Shown != "" {
		return j.Shown, nil
	}
	return j.Reason, nil
}

// progress tells the requester about a step, as a status note.
func (jr *jobRun) progress(ctx context.Context, it *Interaction, outcome string) {
	var output json.RawMessage
	if it.Observation != nil {
		output = it.Observation.Output
	}
	note := stepNote(it, outcome, output)
	if jr.notes == nil {
		jr.writeNote(ctx, note)
		return
	}
	jr.notes <- noteRequest{note: note}
}

// A step's note is written by a goroutine of its own, while the job goes
// on to the model's next answer: the commit of the note overlaps the model
// call instead of lengthening the step. Notes keep their order, and every
// one is written before the task's next change of state (flushNotes).
type noteRequest struct {
	note string
	ack  chan struct{} // a barrier: closed once the notes before it are written
}

// startNotes starts the note writer; stopNotes ends it, after the notes
// queued.
func (jr *jobRun) startNotes(ctx context.Context) {
	jr.notes = make(chan noteRequest, 64)
	jr.notesDone = make(chan struct{})
	go func() {
		defer close(jr.notesDone)
		for req := range jr.notes {
			if req.ack != nil {
				close(req.ack)
				continue
			}
			jr.writeNote(ctx, req.note)
		}
	}()
}

func (jr *jobRun) writeNote(ctx context.Context, note string) {
	if _, err := jr.r.cfg.Tasks.Progress(ctx, jr.j.TaskID, note); err != nil && ctx.Err() == nil {
		jr.r.log.Warn("agent: progress", "task", jr.j.TaskID, "err", err)
	}
}

// flushNotes waits until the notes queued are written.
func (jr *jobRun) flushNotes() {
	if jr.notes == nil {
		return
	}
	ack := make(chan struct{})
	jr.notes <- noteRequest{ack: ack}
	<-ack
}

func (jr *jobRun) stopNotes() {
	if jr.notes != nil {
		close(jr.notes)
		<-jr.notesDone
		jr.notes = nil
	}
}

// stepNote says what a step did in a line: its number, the action and
// what it acted on, the outcome and, for a failure, the error code of
// output (the runtime output).
func stepNote(it *Interaction, outcome string, output json.RawMessage) string {
	var a struct {
		Args struct{ Path, Source, Destination string } `json:"args"`
	}
	_ = json.Unmarshal([]byte(answerText(it.Response.RawResponse)), &a)
	target := a.Args.Path
	if a.Args.Source != "" {
		target = a.Args.Source + " → " + a.Args.Destination
	}
	note := fmt.Sprintf("step %d: %s", it.Sequence+1, cut(it.Response.Action, 100))
	if target != "" {
		note += " " + cut(target, 200)
	}
	note += " → " + outcome
	if outcome == ObsFailed {
		var out struct {
			Code string `json:"error_code"`
		}
		if json.Unmarshal(output, &out) == nil && out.Code != "" {
			note += " (" + out.Code + ")"
		}
	}
	return note
}

// record stores it (new, or completed with its observation) and the job.
// A successful answer consumes what the model was told before it.
func (jr *jobRun) record(ctx context.Context, it *Interaction) error {
	return jr.recordWith(ctx, it, nil)
}

func (jr *jobRun) recordWith(ctx context.Context, it *Interaction, rp *RecoveryPoint) error {
	w, done := jr.prepare(it, rp)
	err := jr.r.cfg.Store.Write(ctx, w)
	done(err)
	if err != nil && it != nil && errors.Is(context.Cause(ctx), ErrCanceled) {
		// The job's cancel stopped the write: the step goes with the
		// job's end (see work).
		jr.givenUp = it
	}
	return err
}

func (jr *jobRun) save(ctx context.Context, it *Interaction) error {
	return jr.recordWith(ctx, it, nil)
}

// prepare makes the write that stores it (nil: the job alone) with the
// job, the interaction completed since the last write (dirty) and rp, and
// returns it with done, to be called with the write's error: the job's
// state in memory follows what was stored. A new interaction takes its
// sequence only once it is stored, so a failed write leaves no gap in the
// history; a successful answer consumes what the model was told before
// it.
func (jr *jobRun) prepare(it *Interaction, rp *RecoveryPoint) (Save, func(error)) {
	j := jr.j
	j.UpdatedAt = jr.r.cfg.Now()
	w := Save{Job: j, Interaction: it, Recovery: rp, Holder: jr.r.cfg.Holder, Earlier: jr.dirty,
		// A job that now waits for a human or ended is not settled
		// until its task shows it (Runtime.show).
		Unsettled: j.Status == InterventionRequired || j.Status.Terminal()}
	fresh := false
	if it != nil {
		if it.Response.Status == ResponseSuccess && it.Guidance != "" && it.Sequence == j.NextSeq {
			// Told to the model, answered: no longer pending.
			w.Consumed, w.ConsumedEnd = it.Guidance, it.guidanceEnd
		}
		// The messages are made of redacted parts (see prompt): only
		// the guidance is redacted here.
		it.Guidance = jr.r.redact(it.Guidance)
		if it.Response.NewStatus == "" {
			it.Response.NewStatus = j.Status
		}
		if w.Earlier != nil && w.Earlier.Sequence == it.Sequence {
			w.Earlier = nil // it is the newer copy
		}
		fresh = it.Sequence == j.NextSeq
		if fresh {
			j.NextSeq++
		}
	}
	historyBytes := j.HistoryBytes
	return w, func(err error) {
		if err != nil {
			j.HistoryBytes = historyBytes
			if fresh {
				j.NextSeq--
			}
			return
		}
		jr.dirty = nil
		switch {
		case it == nil:
		case fresh:
			jr.its = append(jr.its, *it)
		default:
			for i := range jr.its {
				if jr.its[i].Sequence == it.Sequence {
					jr.its[i] = *it
				}
			}
		}
	}
}

// release gives the job's lease up once it waits or ended, and returns
// err (the task's last write's). The job's ending is saved (and shown,
// unless err): a release that fails is logged and the lease left to
// lapse, never the job's error, which would make a new status over the
// ending (work's error path); once the lease lapses, the reconcile pass
// finds nothing to do (or shows what err left unshown).
func (jr *jobRun) release(ctx context.Context, err error) error {
	if rerr := jr.r.cfg.Store.Release(context.WithoutCancel(ctx), jr.j.TaskID, jr.r.cfg.Holder); rerr != nil {
		jr.r.log.Warn("agent: the job's lease could not be given up; it lapses", "task", jr.j.TaskID, "lease", jr.r.cfg.Lease, "err", rerr)
	}
	return err
}

// finishInterrupted completes the last interaction, whose proposal may or
// may not have run before the node stopped: an executor record made for
// the task after the answer was stored is that action (it ran, or waits
// for confirmation); with none, it did not change anything and runs now.
// A record still promoting has no outcome yet (the executor's recovery
// undoes it and records it failed, unless its promotion is still being
// recorded): the step is left as it is, and the job with its lease, to be
// taken up again once the lease lapses. It reports whether the job stops
// (held, finished, waiting for the executor).
func (jr *jobRun) finishInterrupted(ctx context.Context, it *Interaction) (bool, error) {
	r := jr.r
	ans, aerr := parseModelAnswer(it.Response.RawResponse, r.cfg.MaxAnswerBytes)
	if aerr != nil && !it.Response.Redacted {
		return true, fmt.Errorf("agent: stored answer of %s #%d: %w", jr.j.TaskID, it.Sequence, aerr)
	}
	// A redacted answer may no longer parse (a pattern that ran past a
	// JSON string): its action is the one whose data, redacted the same
	// way, is what was stored.
	stored := trimAnswer(answerText(it.Response.RawResponse))
	mine := func(a executor.Action) bool {
		if ans != nil {
			return a.ProposalID == ans.ID
		}
		return r.redact(trimAnswer(string(a.Data))) == stored
	}
	acts, err := r.cfg.Executor.Actions(ctx, jr.j.TaskID)
	if err != nil {
		return true, err
	}
	used := map[string]bool{}
	for _, x := range jr.its {
		if x.Observation != nil && x.Observation.ActionID != "" {
			used[x.Observation.ActionID] = true
		}
	}
	for _, a := range acts {
		// This answer's: the proposal's own id, made after the answer
		// was stored, not yet any step's (a peer's proposal on the same
		// task has another id).
		if used[a.ActionID] || !mine(a) || a.Created.Before(it.Timestamp.Add(-time.Second)) {
			continue
		}
		if a.State == "promoting" {
			r.log.Info("agent: a step the node's stop interrupted is still being promoted or recovered; the job waits for the executor to settle it",
				"task", jr.j.TaskID, "action", a.ActionID)
			return true, nil
		}
		res := a.Result()
		r.log.Info("agent: a step the node's stop interrupted had run; its record completes it", "task", jr.j.TaskID, "action", a.ActionID, "state", a.State)
		return jr.observed(ctx, it, res, false)
	}
	if it.Response.Redacted {
		// What is stored is not what the model sent (secrets were taken
		// out): it is not run, and the model is told to send it again.
		it.Observation = &Observation{Outcome: ObsNone, Reason: "not carried out: the node stopped before it ran",
			Text: "Your last action was not carried out: the node stopped before it ran. Propose it again if it is still needed."}
		return false, jr.record(ctx, it)
	}
	return jr.propose(ctx, it, ans)
}
