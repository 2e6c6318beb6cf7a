package tasks

import (
	"context"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// Store keeps tasks. MemoryStore is the in-process implementation; SQL
// stores implement the same contract, which tasks/storetest checks.
//
// The contract:
//   - Every method honours ctx and returns its error (wrapped) when it is
//     done before the call starts.
//   - Tasks go in and come out as copies: a store never keeps a caller's
//     task, slices or maps, and never returns its own.
//   - Version is 1 after Create and grows by exactly one with every
//     successful Update, AppendHistory and AppendArtifact, by the number
//     of events it records with Apply; a failed call changes nothing.
//   - ID, Owner, ContextID, IdempotencyKey and CreatedAt are set by Create
//     and never change.
//   - The state machine holds: writes go through CheckUpdate, so a terminal
//     task never changes (ErrTerminal) and an illegal change of state fails
//     with ErrIllegalTransition.
//   - Implementations are safe for concurrent use; of two writes expecting
//     the same version, at most one succeeds.
type Store interface {
	// Create stores a new task, checked with CheckCreate, and returns it
	// with Version 1. A task with the same id gives ErrExists; a store that
	// cannot take another task gives ErrStoreFull.
	Create(ctx context.Context, t *Task) (*Task, error)
	// Get returns the task with the id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Task, error)
	// Update replaces the status, history, artifacts and metadata of the
	// task t.ID if its version is expected (else ErrVersionConflict), after
	// CheckUpdate. It returns the stored task.
	Update(ctx context.Context, t *Task, expected int64) (*Task, error)
	// AppendHistory adds messages at the end of the task's history if its
	// version is expected. It returns the stored task.
	AppendHistory(ctx context.Context, id string, expected int64, msgs ...Message) (*Task, error)
	// AppendKeyed continues the task with msg, sent with key, an
	// idempotency key of the task's owner: it appends msg to the history
	// if the task's version is expected (a task in input_required goes
	// back to working, timestamped at, with its status event, as Update
	// records it) and keeps (owner, key) with the task, in one write. The
	// key is looked for first, whatever the version: one the owner
	// already kept, with this task or another, appends nothing and gives
	// a *KeyKeptError (ErrKeyKept) naming its task. A failed call keeps
	// no key. Keys go with their task (Prune, a MemoryStore's eviction);
	// as each call appends one message, a task holds at most one kept key
	// per message of its history (the Service bounds it with MaxHistory).
	// An empty key, or a zero at, is ErrInvalidTask. It returns the
	// stored task.
	AppendKeyed(ctx context.Context, id string, expected int64, key string, msg Message, at time.Time) (*Task, error)
	// AppendArtifact adds an artifact if the task's version is expected.
	// A 101st artifact gives ErrLimit, a second one with the same
	// artifactId ErrExists. It returns the stored task.
	AppendArtifact(ctx context.Context, id string, expected int64, a Artifact) (*Task, error)
	// Apply records an outcome on the task in one write: the state it
	// ends in (through working, as a status event of its own, when the
	// task is submitted or input_required; an outcome in state working is
	// a progress note; in StateKept it keeps its status), the artifacts
	// it adds (those the task already has, by artifactId, left out), those
	// that replace the task's (Outcome.Replace) and the event of each
	// change, at versions one after another from the current one. It
	// returns the stored task, whose version is that of the last event,
	// and the events recorded, for the caller to publish. It reads the
	// task's current version itself, inside the write. PlanApply gives
	// the rules and errors (ErrTerminal, ErrIllegalTransition, ErrLimit);
	// a missing task is ErrNotFound. A failed Apply changes nothing.
	Apply(ctx context.Context, taskID string, out Outcome) (*Task, []Event, error)
	// List returns the tasks matching f, oldest first (CreatedAt, then ID).
	List(ctx context.Context, f Filter) ([]*Task, error)
	// Events returns the task's events with a version above after, in
	// version order. Create, Update, AppendArtifact and Apply record them in the
	// same write as the change they report: a status event (StatusEvent)
	// when a task is created and whenever Update changes its status
	// (StatusChanged), an artifact event (ArtifactEvent) per artifact
	// appended. AppendHistory records none. A missing task gives
	// ErrNotFound.
	Events(ctx context.Context, id string, after int64) ([]Event, error)
	// EventsPage is Events read in pages: the first events of the task
	// with a version above after, in version order, at most limit (at
	// least 1) of them, and no more once they hold maxBytes bytes (the
	// event that reaches it is the page's last; a page holds one event,
	// whatever its size). A SQL store counts an event's stored body, a
	// MemoryStore about the same (its texts, raw, data and URLs, and a
	// few bytes for the rest). An empty page is the end; a missing task
	// gives ErrNotFound. The next page is read after the last version of
	// one: as stored events never change, the pages hold every event
	// once, in order.
	EventsPage(ctx context.Context, id string, after int64, limit, maxBytes int) ([]Event, error)
	// Prune deletes at most limit tasks, with their events, whose status
	// has been terminal since before `before` (Status.Timestamp), oldest
	// first, and returns how many it deleted. Live tasks are never pruned.
	Prune(ctx context.Context, before time.Time, limit int) (int, error)
	// CountByState returns how many tasks are in each state; states with
	// none may be left out.
	CountByState(ctx context.Context) (map[State]int64, error)
}

// ResultKeeper is implemented by stores that also keep the results of
// message/send requests, in the database of their tasks (the SQL stores
// keep a result in the replay record of its request). CreateKeeping is
// Create that, in the same transaction, keeps kept.Result as the result
// of the request (kept.From, kept.RequestID) until kept.Expires: the task
// and the result a retry of its request gets are stored together or not
// at all. A request with no replay record keeps no result; the task is
// stored all the same.
//
// When kept.Claim is set, the request's replay record is not written yet
// (snap.ReplayClaim): CreateKeeping marks it (Writing) and writes it in
// the same transaction,
// and stores the task only if the record is fresh. It settles the claim
// (Claimed) once the transaction is committed, or once it found the
// record held by an earlier message, when it stores nothing and returns
// an error wrapping snap.ErrClaimTaken; a transaction that failed leaves
// the claim pending.
type ResultKeeper interface {
	CreateKeeping(ctx context.Context, t *Task, kept KeptResult) (*Task, error)
}

// ClaimWriter is implemented by stores that write a request's pending
// replay record (a snap.ReplayClaim) in the transaction of a change to an
// existing task, as ResultKeeper writes it with a new one. WithClaim
// returns ctx carrying c: the first write of a task made with it
// (Update, AppendHistory, AppendKeyed, AppendArtifact, Apply) marks c
// (Writing), writes c's record in its own transaction and makes its
// change only if the record is fresh. It settles c (Claimed) once the
// transaction is committed, or once it found the record held by an
// earlier message, when it changes nothing and returns an error wrapping
// snap.ErrClaimTaken; a transaction that failed leaves c pending, and
// the next write tries again. Writes made once c is settled write no
// record.
type ClaimWriter interface {
	WithClaim(ctx context.Context, c *snap.ReplayClaim) context.Context
}

// KeptResult is a request's result for ResultKeeper.CreateKeeping: the
// response payload to answer a retry of the request (From, RequestID)
// with, until Expires.
type KeptResult struct {
	From, RequestID string
	Result          []byte
	Expires         time.Time
	// Claim, when set, is the request's pending replay record, written
	// with the task (see ResultKeeper).
	Claim *snap.ReplayClaim
}

// Filter selects tasks for Store.List. Zero fields match everything.
type Filter struct {
	Owner string
	// ContextID matches one context. The SQL store has no index for it:
	// set Owner too on a large store.
	ContextID string
	// States matches tasks in any of these states.
	States []State
	// Limit caps the number of tasks returned; 0 means no cap.
	Limit int
	// Newest makes Limit keep the newest tasks rather than the oldest;
	// the result is oldest first either way.
	Newest bool
	// Brief leaves each task's History and Artifacts out (nil): a
	// listing that needs the tasks' status only (the console's task
	// list, a reconcile pass) does not read what they carry, up to
	// MaxHistory messages and MaxArtifacts artifacts a task.
	Brief bool
}

// Match reports whether t passes the filter (Limit aside).
func (f Filter) Match(t *Task) bool {
	if f.Owner != "" && t.Owner != f.Owner {
		return false
	}
	if f.ContextID != "" && t.ContextID != f.ContextID {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if t.Status.State == s {
			return true
		}
	}
	return false
}
