package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/dbtext"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Queue is where the task service hands the agent its jobs (it is the
// service's tasks.Agent): Take records a job in the store and wakes the
// runtime. It needs only the store, so the service can be built with it
// before the Runtime, which needs the service.
type Queue struct {
	store  *Store
	now    func() time.Time
	wake   chan struct{}
	limits QueueLimits

	// count holds the jobs queued (waiting for a slot or worked on), by
	// requester, and the tasks admitted whose job is not stored yet (its
	// reservations): the store follows its jobs in it, and Admit
	// decides from it without a query. counted tells that it was read
	// from the store once (Recount).
	count   *tasks.LiveCount
	counted atomic.Bool

	// redact is the runtime's redaction (Runtime.redact), set by New:
	// what the queue stores of a requester's text goes through the same
	// function as everything else the runtime stores. Until a runtime
	// is made on the queue, only the built-in patterns are removed.
	redact atomic.Pointer[func(string) string]
}

var (
	_ tasks.Agent    = (*Queue)(nil)
	_ tasks.Admitter = (*Queue)(nil)
)

// DefaultMaxQueued bounds the jobs that wait for a slot or are worked on,
// every requester's together, when QueueLimits sets no bound.
const DefaultMaxQueued = 1024

// QueuedRetryAfter is the retryAfter, in seconds, of a refusal of a new
// task because the queue is full.
const QueuedRetryAfter = 60

// QueueLimits bounds the jobs that wait for a slot or are worked on
// (PENDING, RUNNING, REVIEWING). A job waiting for a human does not count.
type QueueLimits struct {
	// MaxQueued bounds them, every requester's together; 0 (or less)
	// is DefaultMaxQueued. Identities cost nothing, so this is the
	// bound a flood of them meets.
	MaxQueued int
	// MaxQueuedPerRequester bounds one requester's; 0 (or less) is a
	// sixteenth of MaxQueued, at least 1.
	MaxQueuedPerRequester int
	// MaxNewcomers bounds the queue, every requester's together, for a
	// new task of a requester the node does not know (no task it has
	// answered; see tasks.Service.Known): a flood of fresh identities
	// fills this share and leaves the rest, up to MaxQueued, to known
	// peers. 0 (or less, or more than MaxQueued) is half of MaxQueued,
	// at least 1, as the stream slots' share; MaxQueued keeps no share.
	MaxNewcomers int
	// Exempt reports the requesters neither bound holds (the node's
	// operators); nil exempts none.
	Exempt func(requester string) bool
}

// NewQueue returns the queue of jobs in store with the default limits;
// now is the clock (nil: time.Now).
func NewQueue(store *Store, now func() time.Time) *Queue {
	return NewLimitedQueue(store, now, QueueLimits{})
}

// NewLimitedQueue returns the queue of jobs in store, bounded by limits;
// now is the clock (nil: time.Now). The queue counts its jobs in memory:
// read from store by Recount (or the first Admit), then followed as store
// creates them and moves them in and out of the queue. A store has one
// queue: a new one takes the following over.
func NewLimitedQueue(store *Store, now func() time.Time, limits QueueLimits) *Queue {
	if now == nil {
		now = time.Now
	}
	if limits.MaxQueued <= 0 {
		limits.MaxQueued = DefaultMaxQueued
	}
	if limits.MaxQueuedPerRequester <= 0 {
		limits.MaxQueuedPerRequester = max(limits.MaxQueued/16, 1)
	}
	if limits.MaxNewcomers <= 0 || limits.MaxNewcomers > limits.MaxQueued {
		limits.MaxNewcomers = max(limits.MaxQueued/2, 1)
	}
	q := &Queue{store: store, now: now, wake: make(chan struct{}, 1), limits: limits,
		count: tasks.NewCount(tasks.LiveLimits{PerOwner: limits.MaxQueuedPerRequester, Total: limits.MaxQueued,
			Newcomers: limits.MaxNewcomers}, refuseQueued)}
	store.queued.Store(q.count)
	return q
}

// refuseQueued is the queue's refusal of a new task (a tasks.RefuseFunc).
func refuseQueued(_, _, scope string, _, limit int) error {
	switch scope {
	case "requester":
		return snap.LimitReached(snap.CodeRateLimitExceeded, "too many of this requester's tasks wait for the agent; let one end first",
			QueuedRetryAfter, limit, "requester")
	case tasks.ScopeNewcomers:
		return snap.LimitReached(snap.CodeServiceUnavailable, "the agent's queue keeps its remaining places for peers it knows; retry later",
			QueuedRetryAfter, limit, tasks.ScopeNewcomers)
	}
	return snap.LimitReached(snap.CodeServiceUnavailable, "the agent's queue is full; retry later",
		QueuedRetryAfter, limit, "node")
}

// Admit implements tasks.Admitter: a new task of requester's is refused
// before it is stored when requester already has MaxQueuedPerRequester
// jobs queued (5002, scope "requester"), the queue holds MaxQueued
// (5003, scope "node"), or it holds MaxNewcomers and known (nil: none
// is) reports requester unknown (5003, scope "newcomers"), each with
// retryAfter and the limit. known is asked only then, so that a queue
// below MaxNewcomers admits without it; a requester past its share or a
// full queue is refused without it too. A task
// admitted counts as queued from then on, until release is called once
// its job is stored (or it was not made): sends handled at once do not
// pass the bounds. Admit reads the count in memory, and asks the store
// only if the queue has not counted its jobs yet (Recount). Other
// processes on the same database are seen when Recount runs next, so
// replicas may pass the bounds by what they queued or ended since.
func (q *Queue) Admit(ctx context.Context, requester string, known func() bool) (release func(), err error) {
	if q.limits.Exempt != nil && q.limits.Exempt(requester) {
		return func() {}, nil
	}
	if !q.counted.Load() {
		if err := q.Recount(ctx); err != nil {
			return nil, err
		}
	}
	return q.count.Reserve(dbtext.Clean(requester), known)
}

// Recount reads each requester's queued jobs from the store, with one
// grouped query, and sets the queue's count to it: at start, and then
// to catch up with other processes writing to the same database (the
// replicas of a node on PostgreSQL; see RunRecount). The tasks admitted
// whose job is not stored yet stay counted.
func (q *Queue) Recount(ctx context.Context) error {
	if err := q.count.Recount(ctx, q.store.QueuedByRequester); err != nil {
		return fmt.Errorf("agent: queue: %w", err)
	}
	q.counted.Store(true)
	return nil
}

// RunRecount runs Recount every interval until ctx is done, and returns
// ctx's error, each round given up after bound (see periodic.Pass);
// report, if not nil, is told of each failed round.
func (q *Queue) RunRecount(ctx context.Context, interval, bound time.Duration, report func(error)) error {
	if err := periodic.Every(ctx, "agent queue recount", interval, bound, q.Recount, report); err != nil && ctx.Err() == nil {
		return fmt.Errorf("agent: queue: recount: %w", err)
	}
	return ctx.Err()
}

// Queued returns the jobs queued, all of them and requester's, as the
// queue counts them (the tasks admitted whose job is not stored yet left
// out).
func (q *Queue) Queued(requester string) (all, mine int) {
	return q.count.Sum(), q.count.Of(dbtext.Clean(requester))
}

// Wake tells the runtime to look for runnable jobs now.
func (q *Queue) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Take implements tasks.Agent: a new task becomes a PENDING job; a
// follow-up message on a job that waits for a human (STUCK) resumes it
// with the message as guidance, and one on a job at work is told to the
// model at its next step; so is any earlier message whose hand-over
// failed (see tell).
func (q *Queue) Take(ctx context.Context, t *tasks.Task) error {
	// Secrets the requester's text may hold stay out of the store (the
	// model sees the text through the same redaction).
	text := q.redactText(messageText(t.History[len(t.History)-1]))
	phase := "work"
	if len(t.History) == 1 {
		// A peer's job request sets the job's description and phase
		// (its context files, thresholds and context are read from the
		// message when the job runs); a broken one is refused, naming
		// the field and the rule.
		req, err := jobRequestOf(t.History[0])
		if err != nil {
			return &tasks.Refusal{Reason: err.Error()}
		}
		if req != nil && req.Phase == PhaseReview {
			// The node's own phase, entered when a worker's COMPLETED is
			// reviewed: a job started in it would skip the worker and be
			// answered by the supervisor, whatever agent.review says.
			return &tasks.Refusal{Reason: (&JobRequestError{Field: "/phase",
				Rule: `"review" is the node's review phase, which a job enters only when its worker's work is reviewed`}).Error()}
		}
		if req != nil {
			text, phase = q.redactText(req.TaskDescription), req.Phase
		}
	}
	now := q.now()
	j := &Job{TaskID: t.ID, Requester: t.Owner, Description: cut(text, 2000), Status: Pending, Phase: phase,
		RecoverySeq: -1, ReviewSeq: -1, Told: len(t.History), CreatedAt: now, UpdatedAt: now}
	created, err := q.store.Create(ctx, j)
	if err != nil {
		return err
	}
	if !created {
		if _, err := q.tell(ctx, t, true); err != nil {
			return err
		}
	}
	q.Wake()
	return nil
}

// CountTold counts the messages of the task of each job stored before
// they were counted (Job.Told < 0, by a version before the count) as
// given, its task as task reads it (nil and tasks.ErrNotFound for none:
// the job is left as it is), and returns how many jobs it counted. Run
// it when the node starts, before it takes requests: such a job's
// follow-ups are each told by their Take as the task's last message, and
// of two whose Takes raced, the one read with the other's message could
// count both told and give the job only its own. Once counted, a Take
// gives the job every message from its count on.
func (q *Queue) CountTold(ctx context.Context, task func(context.Context, string) (*tasks.Task, error)) (int, error) {
	const page = 100
	counted := 0
	for after := ""; ; {
		ids, err := q.store.Uncounted(ctx, after, page)
		if err != nil {
			return counted, err
		}
		for _, id := range ids {
			t, err := task(ctx, id)
			if errors.Is(err, tasks.ErrNotFound) {
				continue
			}
			if err != nil {
				return counted, fmt.Errorf("agent: count the messages of job %s: %w", id, err)
			}
			ok, err := q.store.CountTold(ctx, id, len(t.History))
			if err != nil {
				return counted, err
			}
			if ok {
				counted++
			}
		}
		if len(ids) < page {
			return counted, nil
		}
		after = ids[len(ids)-1]
	}
}

// tellTries bounds how often tell reads the job again when another
// writer told it messages meanwhile.
const tellTries = 4

// tell gives the job of task t the messages of t's history it was not
// given (from Job.Told on), added to what its next model call is told,
// in one write that counts them given: a follow-up message, and any
// earlier one whose hand-over failed after the message was stored (its
// request was answered with the task, see tasks.Service.Committed). A job
// waiting for a human goes back in the queue. A job stored before its
// messages were counted (and not counted since, see CountTold) is given
// t's last one when taking (a follow-up handed over), none otherwise. It reports whether the job took some
// (an ended job takes none).
func (q *Queue) tell(ctx context.Context, t *tasks.Task, taking bool) (bool, error) {
	for range tellTries {
		j, err := q.store.Get(ctx, t.ID)
		if err != nil {
			return false, err
		}
		from := j.Told
		if from < 0 {
			if !taking {
				return false, nil
			}
			from = len(t.History) - 1
		}
		if from >= len(t.History) || j.Status.Terminal() {
			return false, nil
		}
		texts := make([]string, 0, len(t.History)-from)
		for _, m := range t.History[from:] {
			if len(tasks.Proposals(m)) > 0 {
				continue // the executor's, not the agent's: counted only
			}
			// Secrets the requester's text may hold stay out of the
			// store (the model sees the text through the same
			// redaction).
			texts = append(texts, "Message from the requester: "+q.redactText(messageText(m)))
		}
		ok, err := q.store.AddMessages(ctx, t.ID, j.Told, len(t.History), strings.Join(texts, separator), q.now())
		if err != nil || ok {
			return ok && len(texts) > 0, err
		}
		// Ended, or told by another writer meanwhile: read it again.
	}
	return false, fmt.Errorf("agent: telling job %s its messages: %w", t.ID, errTellRace)
}

// errTellRace: the job's count of messages changed under every try of
// tell.
var errTellRace = errors.New("told other messages by other writers under every try")

// redactText removes from s what the runtime removes from everything it
// stores (see Queue.redact).
func (q *Queue) redactText(s string) string {
	if f := q.redact.Load(); f != nil {
		return (*f)(s)
	}
	return redactText(s, nil, nil)
}

// separator joins inputs told to the model in one turn.
const separator = "\n\n"
