package tasks

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Errors of the state machine and of stores. They are wrapped with context;
// test them with errors.Is.
var (
	// ErrIllegalTransition: the SNAP specification's task state machine does
	// not allow the change of state (see CanTransition).
	ErrIllegalTransition = errors.New("illegal task state transition")
	// ErrTerminal: the task is completed, failed or canceled and can no
	// longer change.
	ErrTerminal = errors.New("task is in a terminal state")
	// ErrNotFound: no task has the id.
	ErrNotFound = errors.New("task not found")
	// ErrExists: a task (or an artifact of the task) with the id exists.
	ErrExists = errors.New("already exists")
	// ErrVersionConflict: the task's version is not the expected one; it
	// changed since it was read.
	ErrVersionConflict = errors.New("task version conflict")
	// ErrLimit: the change would break a limit, such as 100 artifacts.
	ErrLimit = errors.New("task limit reached")
	// ErrInvalidTask: the task lacks a field a store needs, or holds an
	// unknown state.
	ErrInvalidTask = errors.New("invalid task")
	// ErrStoreFull: the store holds as many tasks as it may and none can be
	// evicted. Errors wrapping it also wrap a *snap.Error 5003.
	ErrStoreFull = errors.New("task store full")
)

// CanTransition reports whether the state machine allows from → to. The
// table is exactly the SNAP specification's: submitted may become working,
// failed or canceled (never completed or input_required); working may
// become completed, failed, canceled or input_required; input_required may
// become working, failed or canceled; completed, failed and canceled are
// terminal. Staying in the same state is not a transition.
func CanTransition(from, to State) bool {
	switch from {
	case StateSubmitted:
		return to == StateWorking || to == StateFailed || to == StateCanceled
	case StateWorking:
		return to == StateCompleted || to == StateFailed || to == StateCanceled || to == StateInputRequired
	case StateInputRequired:
		return to == StateWorking || to == StateFailed || to == StateCanceled
	}
	return false
}

// CheckTransition returns nil when from → to is allowed, else an error
// wrapping ErrIllegalTransition.
func CheckTransition(from, to State) error {
	if CanTransition(from, to) {
		return nil
	}
	return fmt.Errorf("tasks: %q → %q: %w", from, to, ErrIllegalTransition)
}

// CheckUpdate checks that next may replace cur in a store: cur is not
// terminal (ErrTerminal; also ErrIllegalTransition when the state changes),
// a change of state is allowed (ErrIllegalTransition), the state is known,
// the status note is at most 1024 characters and there are at most 100
// artifacts with distinct ids (ErrLimit, ErrExists). Stores call it inside
// the transaction that applies an update.
func CheckUpdate(cur, next *Task) error {
	from, to := cur.Status.State, next.Status.State
	if from.Terminal() {
		if from != to {
			return fmt.Errorf("tasks: task %s: %q → %q: %w: %w", cur.ID, from, to, ErrTerminal, ErrIllegalTransition)
		}
		return fmt.Errorf("tasks: task %s is %s: %w", cur.ID, from, ErrTerminal)
	}
	if !to.Valid() {
		return fmt.Errorf("tasks: task %s: unknown state %q: %w: %w", cur.ID, to, ErrInvalidTask, ErrIllegalTransition)
	}
	if from != to {
		if err := CheckTransition(from, to); err != nil {
			return fmt.Errorf("tasks: task %s: %w", cur.ID, err)
		}
	}
	return checkContents(next)
}

// checkContents applies the limits a store enforces on every write.
func checkContents(t *Task) error {
	if n := utf8.RuneCountInString(t.Status.Message); n > MaxStatusMessage {
		return fmt.Errorf("tasks: task %s: status message of %d characters, at most %d: %w", t.ID, n, MaxStatusMessage, ErrLimit)
	}
	if err := checkText(t.ID, "status message", t.Status.Message); err != nil {
		return err
	}
	if n := len(t.Artifacts); n > MaxArtifacts {
		return fmt.Errorf("tasks: task %s: %d artifacts, at most %d: %w", t.ID, n, MaxArtifacts, ErrLimit)
	}
	if len(t.Artifacts) > 1 {
		seen := make(map[string]struct{}, len(t.Artifacts))
		for _, a := range t.Artifacts {
			if _, dup := seen[a.ArtifactID]; dup {
				return fmt.Errorf("tasks: task %s: artifact %s: %w", t.ID, a.ArtifactID, ErrExists)
			}
			seen[a.ArtifactID] = struct{}{}
		}
	}
	return nil
}

// CheckCreate checks that t can be stored as a new task: it has an id, an
// owner and a known state, and respects the limits of CheckUpdate.
func CheckCreate(t *Task) error {
	switch {
	case t == nil:
		return fmt.Errorf("tasks: nil task: %w", ErrInvalidTask)
	case t.ID == "":
		return fmt.Errorf("tasks: task without id: %w", ErrInvalidTask)
	case t.Owner == "":
		return fmt.Errorf("tasks: task %s without owner: %w", t.ID, ErrInvalidTask)
	case !t.Status.State.Valid():
		return fmt.Errorf("tasks: task %s: unknown state %q: %w", t.ID, t.Status.State, ErrInvalidTask)
	}
	for _, f := range []struct{ name, s string }{
		{"id", t.ID}, {"owner", t.Owner}, {"contextId", t.ContextID}, {"idempotency key", t.IdempotencyKey},
	} {
		if err := checkText(t.ID, f.name, f.s); err != nil {
			return err
		}
	}
	return checkContents(t)
}

// checkText refuses, with ErrInvalidTask, a text field of task id that
// not every store can keep as it is: one that is not UTF-8 (a task's
// JSON cannot carry it) or holds a NUL (PostgreSQL's text cannot).
func checkText(id, field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("tasks: task %q: %s: not UTF-8: %w", id, field, ErrInvalidTask)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("tasks: task %q: %s: holds a NUL character: %w", id, field, ErrInvalidTask)
	}
	return nil
}
