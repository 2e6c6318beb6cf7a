package tasks

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"time"

	"github.com/snapnode/snapnode/internal/dbtext"
)

// Applying an outcome is one write: the state the outcome ends in, the
// artifacts it adds and their events are recorded together by
// Store.Apply, in one transaction of an SQL store, or (TxApplier) in the
// transaction of whoever produced the outcome, so that the task and the
// record of what was done are durable together.

// PlanApply returns what recording out on cur makes, for a Store's Apply:
// the artifacts to append, those that take the place of artifacts the
// task has (put, each with the index of the one it replaces in
// cur.Artifacts), and the events to record, at versions cur.Version+1
// onward. The last event is the outcome's status, unless out.State is
// StateKept; the task's new version is that of the last event (no event:
// nothing to write).
//
// A task that waits (submitted, input_required) passes through working
// first, as a status event of its own. An outcome in state working is a
// step's progress: the task is, or becomes, working with the note, one
// status event. An outcome in StateKept changes artifacts only: the task
// keeps its status. An artifact of out.Replace the task has (by
// artifactId) replaces it, with an artifact event, unless equal to it;
// one it has not is added. An artifact of out.Artifacts the task already
// has (by artifactId: a resumed run's, recorded before the node stopped),
// or that comes twice in out, is left out. cur needs its ID, Status,
// Version and its artifacts' ids only, and the whole of those
// out.Replace names.
//
// Errors: out.State other than working, completed, failed,
// input_required or StateKept, or a
// transition the state machine forbids, is ErrIllegalTransition; a
// terminal task ErrTerminal (and ErrIllegalTransition when out would
// change its state); more than MaxArtifacts artifacts ErrLimit; a
// note over MaxStatusMessage characters ErrLimit; a zero out.At
// ErrInvalidTask.
func PlanApply(cur *Task, out Outcome) (add []Artifact, put []Replaced, evs []Event, err error) {
	switch out.State {
	case StateWorking, StateCompleted, StateFailed, StateInputRequired, StateKept:
	default:
		return nil, nil, nil, fmt.Errorf("tasks: apply to %s: outcome state %q: %w", cur.ID, out.State, ErrIllegalTransition)
	}
	if out.At.IsZero() {
		return nil, nil, nil, fmt.Errorf("tasks: apply to %s: outcome without a time: %w", cur.ID, ErrInvalidTask)
	}
	from := cur.Status.State
	if from.Terminal() {
		// As CheckUpdate: also an illegal transition when the state would
		// change.
		if from != out.State && out.State != StateKept {
			return nil, nil, nil, fmt.Errorf("tasks: apply to %s: task is %s: %w: %w", cur.ID, from, ErrTerminal, ErrIllegalTransition)
		}
		return nil, nil, nil, fmt.Errorf("tasks: apply to %s: task is %s: %w", cur.ID, from, ErrTerminal)
	}
	v := cur.Version
	if (from == StateSubmitted || from == StateInputRequired) && out.State != StateWorking && out.State != StateKept {
		v++
		working := &Task{ID: cur.ID, Version: v, Status: Status{State: StateWorking, Timestamp: out.At}}
		evs = append(evs, StatusEvent(working))
		from = StateWorking
	}
	if from != out.State && out.State != StateKept {
		if err := CheckTransition(from, out.State); err != nil {
			return nil, nil, nil, fmt.Errorf("tasks: apply to %s: %w", cur.ID, err)
		}
	}
	have := make(map[string]int, len(cur.Artifacts)+len(out.Artifacts)+len(out.Replace))
	for i, a := range cur.Artifacts {
		have[a.ArtifactID] = i
	}
	replaced := make(map[string]struct{}, len(out.Replace))
	for _, a := range out.Replace {
		if _, twice := replaced[a.ArtifactID]; twice {
			continue
		}
		replaced[a.ArtifactID] = struct{}{}
		if i, ok := have[a.ArtifactID]; ok {
			if sameArtifact(cur.Artifacts[i], a) {
				continue
			}
			put = append(put, Replaced{Index: i, Artifact: a})
		} else {
			have[a.ArtifactID] = -1
			add = append(add, a)
		}
		v++
		evs = append(evs, ArtifactEvent(cur.ID, v, a))
	}
	for _, a := range out.Artifacts {
		if _, dup := have[a.ArtifactID]; dup {
			continue
		}
		have[a.ArtifactID] = -1
		v++
		add = append(add, a)
		evs = append(evs, ArtifactEvent(cur.ID, v, a))
	}
	if n := len(cur.Artifacts) + len(add); n > MaxArtifacts {
		return nil, nil, nil, fmt.Errorf("tasks: apply to %s: %d artifacts, at most %d: %w", cur.ID, n, MaxArtifacts, ErrLimit)
	}
	if out.State == StateKept {
		return add, put, evs, nil
	}
	final := &Task{ID: cur.ID, Version: v + 1, Status: Status{State: out.State, Timestamp: out.At, Message: out.Note}}
	if err := checkContents(final); err != nil {
		return nil, nil, nil, fmt.Errorf("tasks: apply: %w", err)
	}
	return add, put, append(evs, StatusEvent(final)), nil
}

// Replaced is an artifact of Outcome.Replace that takes the place of the
// task's artifact at Index (PlanApply).
type Replaced struct {
	Index    int
	Artifact Artifact
}

// sameArtifact reports whether a and b are the same artifact, as JSON.
func sameArtifact(a, b Artifact) bool {
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

// TxApplier is a Store whose Apply can run inside a transaction that
// another component opened on the store's own database and commits: the
// SQL stores. The contract is Apply's, with two differences: nothing is
// durable, nor visible to others, until tx commits (and nothing stays if
// it rolls back), and tx belongs to the caller (ApplyTx neither commits
// nor rolls it back). tx must be a transaction of the store's database.
// A refusal of the outcome (ErrNotFound, ErrTerminal,
// ErrIllegalTransition, ErrLimit, ErrInvalidTask) writes nothing in tx,
// which the caller may still commit; any other error leaves tx to be
// rolled back.
type TxApplier interface {
	ApplyTx(ctx context.Context, tx *sql.Tx, taskID string, out Outcome) (*Task, []Event, error)
}

// TxStater is a Store that reads a task's state inside a transaction of
// its own database that another component opened and commits (the SQL
// stores): StateTx returns the state as tx sees it, ErrNotFound for no
// such task, and holds the task's row against other writers until tx
// ends (PostgreSQL; SQLite has one writer), so that what tx then writes
// happens before, or after, any change of the task's state.
type TxStater interface {
	StateTx(ctx context.Context, tx *sql.Tx, taskID string) (State, error)
}

// Settlement records one outcome of a task, either inside the transaction
// of the component that produced it (In) or on its own (Done), and
// publishes its events once they are durable. It lets the executor commit
// its record of an action and the task's outcome in one transaction:
//
//	st := svc.Settle(taskID)
//	res, err := exec.Run(ctx, executor.Request{…, Then: func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
//		return st.In(ctx, tx, outcomeOf(res))
//	}})
//	…
//	t, err := st.Done(ctx, outcomeOf(res))
//
// Done must be called once the transaction In ran in has committed (or
// when In never ran): it publishes the events In recorded, or, when In did
// not run (a store without transactions, a run that ended without a
// commit of its own), applies out with Store.Apply — the same outcome
// recorded after the producer's commit rather than with it, which a
// restart completes (Service.Resume). out is the outcome In was given. A
// Settlement serves one call: In may run on another goroutine (a database
// writer's) while the call waits, Done after the call returned.
type Settlement struct {
	s      *Service
	taskID string
	task   *Task
	events []Event
}

// Settle returns a Settlement of an outcome of the task.
func (s *Service) Settle(taskID string) *Settlement { return &Settlement{s: s, taskID: taskID} }

// In records out inside tx when the Service's store is a TxApplier, and
// does nothing otherwise (Done then applies it). A refusal of the outcome
// (the task was canceled meanwhile, say) is not In's error: nothing is
// written, the producer's commit goes on, and Done reports the refusal.
// Any other error is the database's: the caller must fail its
// transaction with it.
func (st *Settlement) In(ctx context.Context, tx *sql.Tx, out Outcome) error {
	ta, ok := st.s.store.(TxApplier)
	if !ok {
		return nil
	}
	out, err := st.s.outcome(st.taskID, out)
	if err != nil {
		return nil // an invalid artifact: Done applies the outcome and reports it
	}
	t, evs, err := ta.ApplyTx(ctx, tx, st.taskID, out)
	if refused(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tasks: apply to %s: %w", st.taskID, err)
	}
	st.task, st.events = t, evs
	return nil
}

// Unended checks, inside tx, that the task has not ended: an error
// wrapping ErrTerminal when it has (canceled, completed, failed,
// rejected), ErrNotFound when there is no such task. With a TxStater
// store the task's row is held until tx ends, so a producer that checks
// before it acts runs either before the task ends or not at all; with
// any other store the check reads the task as it is now.
func (st *Settlement) Unended(ctx context.Context, tx *sql.Tx) error {
	var state State
	var err error
	if ts, ok := st.s.store.(TxStater); ok {
		state, err = ts.StateTx(ctx, tx, st.taskID)
	} else {
		var t *Task
		if t, err = st.s.store.Get(ctx, st.taskID); err == nil {
			state = t.Status.State
		}
	}
	if err != nil {
		return fmt.Errorf("tasks: state of %s: %w", st.taskID, err)
	}
	if state.Terminal() {
		return fmt.Errorf("tasks: task %s is %s: %w", st.taskID, state, ErrTerminal)
	}
	return nil
}

// Done returns the task once the outcome is recorded: it publishes the
// events In recorded (the transaction has committed), or applies out now
// when In did not run.
func (st *Settlement) Done(ctx context.Context, out Outcome) (*Task, error) {
	if st.task == nil {
		return st.s.Resolve(ctx, st.taskID, out)
	}
	st.s.publishWrite(ctx, st.taskID, st.events)
	return st.task, nil
}

// refused reports whether err is a store's refusal of an outcome, which
// writes nothing.
func refused(err error) bool {
	for _, r := range []error{ErrNotFound, ErrTerminal, ErrIllegalTransition, ErrLimit, ErrInvalidTask} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// Resolve records a Runner's outcome (or a worker's: an outcome in state
// working is a step's progress note) on a task in one write of the store
// (Store.Apply: its state, through working when the task waits for input,
// as after a confirmation; its artifacts, those it already has left out,
// as a resumed run's added before the node stopped) and publishes the
// events once they are durable. A missing task is 1001.
func (s *Service) Resolve(ctx context.Context, taskID string, out Outcome) (*Task, error) {
	out, err := s.outcome(taskID, out)
	if err != nil {
		return nil, err
	}
	t, evs, err := s.store.Apply(ctx, taskID, out)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: apply to %s: %w", taskID, err)
	}
	s.publishWrite(ctx, taskID, evs)
	s.ended(ctx, t)
	return t, nil
}

// outcome checks out and makes it ready for a store: its artifacts
// valid, its note made dbtext.Clean and cut to MaxStatusMessage bytes, its
// time the Service's clock's when unset.
func (s *Service) outcome(taskID string, out Outcome) (Outcome, error) {
	for _, arts := range [][]Artifact{out.Artifacts, out.Replace} {
		for i := range arts {
			if err := arts[i].Validate(); err != nil {
				return Outcome{}, err
			}
		}
	}
	out.Note = textcut.Prefix(dbtext.Clean(out.Note), MaxStatusMessage)
	if out.At.IsZero() {
		out.At = s.timestamp()
	}
	out.At = out.At.UTC().Truncate(time.Microsecond)
	return out, nil
}

// publishWrite is publish for the events of a write through this
// Service (see publishLocal).
func (s *Service) publishWrite(ctx context.Context, taskID string, evs []Event) {
	defer s.lockTask(taskID).Unlock()
	s.publishLocal(ctx, taskID, evs...)
}

// publishLocal hands the events of a write through this Service to the
// subscribers; the task's lock is held. The events of one write are at
// versions one after another from the task's version before it. A
// subscription may lack events written before that version and not
// published yet: another process's, which WatchOthers has not read yet,
// or a Runner's outcome, recorded outside the task's lock and published
// after it. They are read and published first, since a subscription
// given a later version takes no earlier one (a read that fails leaves
// them missed). Only a followed task with such a gap costs a read.
func (s *Service) publishLocal(ctx context.Context, taskID string, evs ...Event) {
	if len(evs) == 0 {
		return
	}
	if low, ok := s.events.lowest(taskID); ok && low < evs[0].Version-1 {
		s.publishStored(context.WithoutCancel(ctx), taskID, low, evs[0].Version)
	}
	for _, ev := range evs {
		s.events.Publish(ev)
	}
}

// publishStored publishes the stored events of taskID after version
// after and, when before is not 0, before version before, for the streams
// that may lack them, and reports whether it could read them; the task's
// lock is held. A read that fails is logged.
func (s *Service) publishStored(ctx context.Context, taskID string, after, before int64) bool {
	evs, err := s.store.Events(ctx, taskID, after)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("reading a task's events for its streams", "task", taskID, "err", err)
		}
		return false
	}
	for _, ev := range evs {
		if before == 0 || ev.Version < before {
			s.events.Publish(ev)
		}
	}
	return true
}
