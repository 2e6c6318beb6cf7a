package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/snapnode/snapnode/executor"
)

// Errors of ResumeFrom.
var (
	// ErrNoCheckpoint: the job has no recovery point of that id.
	ErrNoCheckpoint = errors.New("agent: no such checkpoint")
	// ErrNotResumable: the job is not waiting for a human (it runs, is
	// queued, or ended), so it cannot be restarted from a checkpoint.
	ErrNotResumable = errors.New("agent: the job cannot be resumed now")
)

// Resumed is what ResumeFrom did.
type Resumed struct {
	TaskID     string `json:"task"`
	Checkpoint string `json:"checkpoint"`
	Phase      string `json:"phase"`
	// RolledBack are the executor actions undone, newest first.
	RolledBack []string `json:"rolled_back"`
}

// ResumeFrom restarts the job of taskID from its recovery point
// checkpoint: every action the job carried out after that point is undone
// through the executor's rollback (newest first; never by writing the
// sandbox directly), and the job is queued again in the checkpoint's
// resume phase, the model told what was undone. Only a job that waits for
// a human (INTERVENTION_REQUIRED), or one a resume left DRAFT (its process
// stopped during it), can be resumed (else ErrNotResumable); while the
// rollbacks run the job is DRAFT, so that no process claims it, and a
// rollback the executor refuses (a file changed since) leaves it waiting,
// with the reason. Once the job is DRAFT the resume is finished whether
// or not ctx is canceled meanwhile (its values kept), rollbacks included:
// the job is queued with the note to the model in one write, so that
// whoever claims it is told; should that write fail, the job waits for a
// human again, the failure as its reason, with the note pending when it
// can be written (a later resume adds its own), and never stays DRAFT. An
// unknown checkpoint is ErrNoCheckpoint, with the job's checkpoints named.
// A job whose task has ended (canceled while it waited, before reconcile
// ends the job), or that a resume works on already (in this process, or in
// another sharing the database: the resume holds the job's lease, renewed
// before each rollback), is ErrNotResumable: nothing is rolled back. A job
// left DRAFT by a process that stopped is resumed once that lease lapses.
func (r *Runtime) ResumeFrom(ctx context.Context, taskID, checkpoint string) (*Resumed, error) {
	// One resume of a job at a time in this process: a job DRAFT because
	// a resume here is rolling it back is not resumed again over it (a
	// DRAFT left by a stopped process is).
	r.mu.Lock()
	if r.resuming[taskID] {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: job %s is being resumed already", ErrNotResumable, taskID)
	}
	r.resuming[taskID] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.resuming, taskID)
		r.mu.Unlock()
	}()
	st := r.cfg.Store
	j, err := st.Get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	// A job whose task ended (canceled while it waited: reconcile ends
	// the job later) is not resumed: nothing is rolled back for it.
	if r.cfg.Tasks != nil {
		t, err := r.cfg.Tasks.Task(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if ts := t.Status.State; ts.Terminal() {
			return nil, fmt.Errorf("%w: job %s: its task is %s", ErrNotResumable, taskID, ts)
		}
	}
	rps, err := st.RecoveryPoints(ctx, taskID)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rps, func(rp RecoveryPoint) bool { return rp.CheckpointID == checkpoint })
	if i < 0 || !rps[i].CanResumeFrom {
		ids := make([]string, 0, len(rps))
		for _, rp := range rps {
			if rp.CanResumeFrom {
				ids = append(ids, rp.CheckpointID)
			}
		}
		return nil, fmt.Errorf("%w: job %s has no checkpoint %q to resume from (it has: %s)", ErrNoCheckpoint, taskID, checkpoint, strings.Join(ids, ", "))
	}
	rp := rps[i]
	if j.Status != InterventionRequired && j.Status != Draft {
		return nil, fmt.Errorf("%w: job %s is %s; only a job that waits for a human (%s) is resumed from a checkpoint", ErrNotResumable, taskID, j.Status, InterventionRequired)
	}
	was, holder, now := j.Status, ResumeHolder(r.cfg.Holder), r.cfg.Now()
	j.Status, j.UpdatedAt = Draft, now
	// The claim takes the job's lease: a resume in another process
	// sharing the database (a replica) is refused while this one runs,
	// and one left DRAFT by a process that stopped is resumed once its
	// lease has lapsed.
	if err := st.Write(ctx, Save{Job: j, Expect: was, Holder: holder, LeaseUntil: now.Add(r.cfg.Lease), Now: now}); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return nil, fmt.Errorf("%w: job %s moved on meanwhile, another process is resuming it, or its runner has yet to show its wait on the task (try again in a moment)", ErrNotResumable, taskID)
		}
		return nil, err
	}
	// Claimed: the resume is finished even if the caller goes (an admin
	// connection closed), for a job left DRAFT is claimed by no process,
	// and one sent back to waiting half-way leaves a workspace half as it
	// was at the checkpoint.
	ctx = context.WithoutCancel(ctx)
	its, err := st.Interactions(ctx, taskID)
	if err != nil {
		return nil, r.backToWaiting(ctx, j, err, "")
	}
	undo := changedActions(its, rp.Sequence, j.NextSeq)
	slices.Reverse(undo)
	res := &Resumed{TaskID: taskID, Checkpoint: checkpoint, Phase: rp.ResumePhase, RolledBack: []string{}}
	for _, id := range undo {
		// The lease outlives the rollbacks, however many.
		if ok, err := st.Renew(ctx, taskID, holder, r.cfg.Now().Add(r.cfg.Lease)); err != nil {
			return nil, r.backToWaiting(ctx, j, fmt.Errorf("agent: resume %s from %s: %w", taskID, checkpoint, err), "")
		} else if !ok {
			// Lapsed, and another process's resume took the job: it
			// goes on from here.
			return nil, fmt.Errorf("%w: job %s: another process took the resume over", ErrNotResumable, taskID)
		}
		err := r.cfg.Executor.Rollback(ctx, id)
		switch {
		case errors.Is(err, executor.ErrAlreadyRolledBack):
			continue // undone before (an earlier resume, an operator)
		case err != nil:
			return nil, r.backToWaiting(ctx, j, fmt.Errorf("agent: resume %s from %s: rollback of action %s: %w", taskID, checkpoint, id, err), "")
		}
		res.RolledBack = append(res.RolledBack, id)
	}
	phase := rp.ResumePhase
	if phase == "" {
		phase = PhaseWork
	}
	note := fmt.Sprintf("An operator restarted the job from checkpoint %s (after step %d), in the %s phase.", checkpoint, rp.Sequence+1, phase)
	undone := "nothing to undo" // for the reason, should the job wait again
	if len(res.RolledBack) > 0 {
		ids := strings.Join(res.RolledBack, ", ")
		note += fmt.Sprintf(" The host undid the %d changes made since (actions %s): the workspace is as it was then.", len(res.RolledBack), ids)
		undone = "actions " + ids + " undone"
	}
	j.Status, j.Phase, j.Retries, j.Reason, j.RecoverySeq, j.ReviewSeq = Pending, phase, 0, "", j.NextSeq, -1
	if phase == PhaseReview {
		j.ReviewSeq = rp.Sequence // the work as it was at the checkpoint is reviewed
	}
	j.UpdatedAt = r.cfg.Now()
	// The note and the queueing in one write: the claim that follows
	// always finds the note, and a failure leaves neither.
	// The write gives up the model's record of the job (Save.Rewound):
	// the work it started elsewhere (a delegate's task) holds the steps
	// undone, and is canceled; the job's next step starts afresh.
	if err := st.Write(ctx, Save{Job: j, Expect: Draft, Holder: holder, Release: true, Input: note, Rewound: true}); err != nil {
		// Waiting in the checkpoint's phase, the note pending if it can
		// be: an operator's next word (or another resume, which adds a
		// note of its own) takes it on, and the model is told what the
		// host undid.
		return nil, r.backToWaiting(ctx, j, fmt.Errorf("agent: resume %s from %s (%s): queue the job with the note to the model: %w", taskID, checkpoint, undone, err), note)
	}
	r.log.Info("agent: job resumed from a checkpoint", "task", taskID, "checkpoint", checkpoint, "rolled_back", len(res.RolledBack))
	// The work elsewhere the rewind gave up is canceled by the claim
	// that takes the job up, before its first step (or by a reconcile
	// pass), on the runtime's own goroutines: this call comes from an
	// operator's request, which may come as Run returns.
	r.Wake()
	return res, nil
}

// backToWaiting puts a job whose resume failed back to waiting for a
// human, the failure as its reason, with note added to its pending input
// ("": none; should that write fail, the job waits without it: it must
// not stay DRAFT), and returns cause.
func (r *Runtime) backToWaiting(ctx context.Context, j *Job, cause error, note string) error {
	ctx = context.WithoutCancel(ctx)
	j.Status, j.Reason, j.Shown, j.UpdatedAt = InterventionRequired, cut(r.redact(cause.Error()), 2000), "", r.cfg.Now()
	err := r.cfg.Store.Write(ctx, Save{Job: j, Expect: Draft, Holder: ResumeHolder(r.cfg.Holder), Release: true, Input: note})
	if err != nil && note != "" {
		err = r.cfg.Store.Write(ctx, Save{Job: j, Expect: Draft, Holder: ResumeHolder(r.cfg.Holder), Release: true})
	}
	if err != nil {
		return errors.Join(cause, err)
	}
	return cause
}
