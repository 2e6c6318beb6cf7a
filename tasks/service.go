package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"hash/maphash"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/dbtext"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/snap"
)

// Defaults of ServiceOptions.
const (
	DefaultIdempotencyKeys = 10_000
	DefaultMaxHistory      = 1000
)

// ServiceOptions configure a Service. The zero value is usable.
type ServiceOptions struct {
	// Now is the clock; nil means time.Now. Status timestamps are taken in
	// UTC and truncated to microseconds, which SQL stores keep exactly.
	Now func() time.Time
	// NewID makes task and context ids; nil means snap.NewID (UUID v4).
	// Ids must match ^[a-zA-Z0-9_-]+$ and be at most 128 characters.
	NewID func() string
	// Operators are the P2TR addresses that may read and cancel any task.
	Operators []string
	// IsOperator, when set, reports which addresses are operators instead
	// of Operators, which is then not read: for a caller that keeps the
	// operators elsewhere and changes them there, so that the Service
	// and the others asking it give one answer (the node asks its
	// policy holder, which puts the operators in force with the policy).
	IsOperator func(addr string) bool
	// IdempotencyKeys bounds the remembered (requester, idempotencyKey)
	// pairs; the oldest is forgotten first. 0 means
	// DefaultIdempotencyKeys; a negative value disables idempotency keys.
	IdempotencyKeys int
	// MaxHistory bounds the messages of one task: a message/send that
	// would exceed it fails with 1004. 0 means DefaultMaxHistory.
	MaxHistory int
	// EventBuffer is the channel capacity of a subscription; 0 means
	// DefaultEventBuffer.
	EventBuffer int
	// Logger receives internal failures, which peers only see as 5001;
	// nil discards them.
	Logger *slog.Logger
	// Runner carries out the proposals messages carry; nil leaves such
	// tasks submitted.
	Runner Runner
	// Agent works on tasks whose messages carry no proposal (free text);
	// nil leaves them as they are, submitted.
	Agent Agent
	// Ended, when set, is called with a task once this Service wrote it
	// ended (completed, failed or canceled: a follow-up message's run or
	// refusal, a cancel, a worker's outcome), after the write and outside
	// the task's lock; again for a cancel of a task already canceled.
	// The node withdraws there the actions the task still held, which no
	// decision can reach any more. Another process's writes do not call
	// it (the node's reconcile pass finds those).
	Ended func(ctx context.Context, t *Task)
	// KeepResults, when above 0, keeps the answer of each message/send
	// request (through the handler Register installs) that creates a
	// task — the task as created — as the request's result for this long,
	// in the task's own write, when the Store is a ResultKeeper (other
	// stores keep nothing). A retry of a request whose answer a crash
	// lost gets its task, and a task is never stored without that
	// result. The snap.Server is told (snap.ResultKept), and does not
	// write the answer again when it is the same.
	KeepResults time.Duration
	// StreamMaxDuration bounds one message/stream or tasks/resubscribe:
	// then the final response carries the task as it is (a free-text
	// task stays submitted for ever). 0 means DefaultStreamMaxDuration.
	StreamMaxDuration time.Duration
	// StreamHeartbeat is the longest a stream stays silent: a quiet task
	// gets a heartbeat progress event this often (an SSE client gives up
	// after 30 s without data). 0 means DefaultStreamHeartbeat.
	StreamHeartbeat time.Duration
	// MaxStreams bounds the streams open at once, MaxStreamsPerRequester
	// those of one requester, MaxStreamsPerKey those of the addresses of
	// one key (its mainnet and testnet addresses, which one Nostr key
	// signs for) together; past one a stream request fails with 5002
	// {retryAfter, limit, scope}. 0 means DefaultMaxStreams,
	// DefaultMaxStreamsPerRequester and MaxStreamsPerRequester.
	MaxStreams, MaxStreamsPerRequester, MaxStreamsPerKey int
	// MaxNewcomerStreams bounds the streams of requesters with no task
	// history (neither an operator nor the owner of a task) together, so
	// that throwaway identities cannot take every slot from known ones;
	// past it such a request fails with 5002 {scope: "newcomers"}. 0 (or
	// more than MaxStreams) means half of MaxStreams.
	MaxNewcomerStreams int
	// StreamWait is how long a stream request waits for a slot when none
	// is free (MaxStreams open, or MaxNewcomerStreams for a newcomer)
	// before the 5002; known requesters waiting are served before
	// newcomers. 0 refuses at once. MaxStreamWaiters bounds the requests
	// waiting, known and newcomers each (0 means
	// DefaultMaxStreamWaiters); past it a request is refused at once.
	StreamWait       time.Duration
	MaxStreamWaiters int
	// InputModes are the media types of the parts a message/send (or
	// message/stream) may carry, the card's defaultInputModes: a part of
	// another type is refused with 1005 before anything is stored (see
	// snap.CheckReadable). nil means InputModes(); a list should hold
	// only types of it, which the agent reads.
	InputModes []string
	// Lifetime is the node's: when it ends, the steps a request's commit
	// left running stop (see afterCommit), which no longer end with the
	// request's context. nil means they stop only at their own bounds.
	Lifetime context.Context
}

// Service is the task engine behind message/send, tasks/get and
// tasks/cancel: it validates payloads, creates and continues tasks, enforces
// ownership and the state machine, and publishes task events. It is safe
// for concurrent use.
//
// Within one process every write to a task goes through the Service, which
// serializes the writes to each task so that events leave in version order.
// Writes by other processes sharing a store are seen by reads and retried
// over on version conflicts; their events reach this Service's streams
// through WatchOthers.
type Service struct {
	store      Store
	events     *Broker
	now        func() time.Time
	newID      func() string
	operators  atomic.Pointer[func(addr string) bool] // see SetOperators
	inputModes atomic.Pointer[[]string]               // see SetInputModes
	maxHistory int
	keys       *keyCache
	log        *slog.Logger
	runner     Runner
	onEnded    func(ctx context.Context, t *Task)
	agent      Agent
	keep       time.Duration
	streams    *streamLimits
	life       context.Context

	seed      maphash.Seed
	taskLocks [256]sync.Mutex
	keyLocks  [64]sync.Mutex
	// failedLog bounds the lines of requests failed inside (a store
	// down): a peer decides how many requests it sends.
	failedLog logcap.Limiter
}

// conflictRetries bounds how often a write re-reads a task that another
// process changed under it.
const conflictRetries = 4

// NewService returns a Service keeping its tasks in store.
func NewService(store Store, opts ServiceOptions) *Service {
	s := &Service{
		store:      store,
		events:     NewBroker(opts.EventBuffer),
		now:        opts.Now,
		newID:      opts.NewID,
		maxHistory: opts.MaxHistory,
		log:        opts.Logger,
		runner:     opts.Runner,
		agent:      opts.Agent,
		onEnded:    opts.Ended,
		keep:       opts.KeepResults,
		streams:    newStreamLimits(opts),
		life:       opts.Lifetime,
		seed:       maphash.MakeSeed(),
	}
	if s.life == nil {
		s.life = context.Background()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = snap.NewID
	}
	if opts.IsOperator != nil {
		s.operators.Store(&opts.IsOperator)
	} else {
		s.SetOperators(opts.Operators)
	}
	s.SetInputModes(opts.InputModes)
	if s.maxHistory <= 0 {
		s.maxHistory = DefaultMaxHistory
	}
	switch {
	case opts.IdempotencyKeys == 0:
		s.keys = newKeyCache(DefaultIdempotencyKeys)
	case opts.IdempotencyKeys > 0:
		s.keys = newKeyCache(opts.IdempotencyKeys)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Events returns the broker the Service publishes to.
func (s *Service) Events() *Broker { return s.events }

// IsOperator reports whether addr may read and cancel every task.
func (s *Service) IsOperator(addr string) bool {
	return (*s.operators.Load())(addr)
}

// SetOperators replaces the operators (ServiceOptions.Operators, or
// ServiceOptions.IsOperator, which is no longer asked) while the
// Service runs: every later request is judged by the new list, so an
// address removed from it loses the role at once.
func (s *Service) SetOperators(addrs []string) {
	m := make(map[string]struct{}, len(addrs))
	for _, op := range addrs {
		m[op] = struct{}{}
	}
	is := func(addr string) bool {
		_, ok := m[addr]
		return ok
	}
	s.operators.Store(&is)
}

// SetInputModes replaces the media types the parts of a message may
// have (ServiceOptions.InputModes; nil means InputModes()).
func (s *Service) SetInputModes(modes []string) {
	if modes == nil {
		modes = InputModes()
	}
	modes = slices.Clone(modes)
	s.inputModes.Store(&modes)
}

// parseSend is snap.ParseSendParams, then a part of a media type the node
// does not read is refused with 1005 (snap.CheckReadable): on every
// transport, before a task is created or an interceptor sees the message.
func (s *Service) parseSend(payload []byte) (*SendParams, error) {
	p, err := snap.ParseSendParams(payload)
	if err != nil {
		return nil, err
	}
	if e := snap.CheckReadable("payload.message.parts", p.Message.Parts, *s.inputModes.Load()); e != nil {
		return nil, e
	}
	return p, nil
}

func (s *Service) canRead(requester string, t *Task) bool {
	return t.Owner == requester || s.IsOperator(requester)
}

func (s *Service) timestamp() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

func (s *Service) lockTask(id string) *sync.Mutex {
	m := &s.taskLocks[maphash.String(s.seed, id)%uint64(len(s.taskLocks))]
	m.Lock()
	return m
}

func notFound(id string) *snap.Error {
	return snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": id})
}

// KeyFinder is implemented by stores that can find a task by the
// idempotency key it was created with, or that was sent with a message to
// it (Store.AppendKeyed), so that keys outlive the service's memory (a
// restart, another replica). It returns ErrNotFound when none.
type KeyFinder interface {
	FindByIdempotencyKey(ctx context.Context, owner, key string) (*Task, error)
}

// SendMessage handles a message/send request from owner, the authenticated
// requester, with its params as the router decoded them.
//
// Without taskId it creates a task: a fresh id and a fresh context (contexts
// are never shared between requesters), state submitted, the message as its
// history. The task waits there for a worker, whatever the message holds
// (free text, or a proposal for the executor).
//
// With taskId it continues the task: only its owner may (else 1001, as if
// it did not exist); a terminal task cannot be continued (1004 on
// payload.taskId, constraint "state"); a task in input_required goes back
// to working; the message is appended to the history.
//
// With an idempotencyKey, a request repeating a key of the same owner gets
// the task the key first produced, or first continued, as it is now, and
// changes nothing. A key sent with taskId is kept with the task, in the
// write of the message (Store.AppendKeyed), so a store that outlives the
// process (or is shared by replicas) still knows it.
func (s *Service) SendMessage(ctx context.Context, owner string, req *SendParams) (*Task, error) {
	if owner == "" {
		return nil, errors.New("tasks: send message: no requester")
	}
	if req.IdempotencyKey != "" && s.keys != nil {
		k := idemKey{owner: owner, key: req.IdempotencyKey}
		m := &s.keyLocks[maphash.Comparable(s.seed, k)%uint64(len(s.keyLocks))]
		m.Lock()
		defer m.Unlock()
		id, ok := s.keys.get(k)
		if !ok {
			// After a restart, or on another replica, the store knows.
			if f, can := s.store.(KeyFinder); can {
				t, err := f.FindByIdempotencyKey(ctx, owner, req.IdempotencyKey)
				switch {
				case err == nil:
					id, ok = t.ID, true
				case !errors.Is(err, ErrNotFound):
					return nil, fmt.Errorf("tasks: send message: %w", err)
				}
			}
		}
		if ok {
			if req.TaskID != "" && req.TaskID != id {
				return nil, snap.FieldError(root+".idempotencyKey", "unique", "a key not used for another task", req.IdempotencyKey)
			}
			t, err := s.store.Get(ctx, id)
			switch {
			case err == nil && t.Owner == owner:
				return t, nil
			case err != nil && !errors.Is(err, ErrNotFound):
				return nil, fmt.Errorf("tasks: send message: %w", err)
			}
			s.keys.remove(k) // the task is gone: the key starts afresh
		}
		t, err := s.send(ctx, owner, req, true)
		var kept *KeyKeptError
		if errors.As(err, &kept) {
			// Kept with a task by another process, since the lookup.
			if kept.TaskID != req.TaskID {
				return nil, snap.FieldError(root+".idempotencyKey", "unique", "a key not used for another task", req.IdempotencyKey)
			}
			if t, err = s.store.Get(ctx, kept.TaskID); err != nil {
				return nil, fmt.Errorf("tasks: send message: %w", err)
			}
		}
		if err == nil {
			s.keys.put(k, t.ID)
		}
		return t, err
	}
	return s.send(ctx, owner, req, false)
}

// send handles the message of req; keyed says that its idempotency key
// is honoured, and is kept with the task it continues (a *KeyKeptError
// when it was kept already, and the message not added).
func (s *Service) send(ctx context.Context, owner string, req *SendParams, keyed bool) (*Task, error) {
	proposals := Proposals(req.Message) // classified once
	if err := checkProposals(proposals); err != nil {
		return nil, err
	}
	var refusal *Refusal
	if req.TaskID == "" && len(proposals) == 0 {
		refusal = s.screen()
		if a, ok := s.agent.(Admitter); ok && refusal == nil {
			release, err := a.Admit(ctx, owner, func() bool { return s.Known(ctx, owner) })
			if err != nil {
				return nil, fmt.Errorf("tasks: send message: %w", err)
			}
			defer release() // the job is stored by then (delegate), or none is
		}
	}
	t, err := s.receive(ctx, owner, req, refusal, keyed)
	if err != nil {
		return nil, err
	}
	// The message is stored, with the request's replay record: what
	// follows cannot take it back (see Committed), and is the node's
	// work, which a requester that goes away does not stop.
	next, step := t, "the agent's take"
	if len(proposals) == 0 {
		actx, done := s.afterCommit(ctx, claimedWrite)
		next, err = s.delegate(actx, t, req.TaskID == "")
		done()
	} else {
		step = "the run of its proposals"
		actx, done := s.afterCommit(ctx, 0)
		next, err = s.run(actx, t, Job{TaskID: t.ID, Requester: owner, Proposals: proposals})
		done()
	}
	if err != nil {
		return s.Committed(ctx, t.ID, t, step, err)
	}
	return next, nil
}

// afterCommit is the context of the steps after a request's commit (the
// agent's Take, the run of its proposals): ctx's values without its
// cancellation, since a requester that goes away (its HTTP connection
// dropped) must not leave its task for the reconcile pass minutes later,
// ended by the node's lifetime (ServiceOptions.Lifetime) instead, and
// by bound when above 0 (a run is bounded by the executor's own limits).
// done releases it.
func (s *Service) afterCommit(ctx context.Context, bound time.Duration) (_ context.Context, done func()) {
	if s.agent == nil && s.runner == nil {
		return ctx, func() {} // no step to run
	}
	ctx = context.WithoutCancel(ctx)
	release := func() {}
	if s.life.Done() != nil {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		if s.life.Err() != nil { // AfterFunc would cancel it later, on a goroutine
			cancel(context.Cause(s.life))
		}
		stop := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
		release = func() { stop(); cancel(nil) }
	}
	if bound <= 0 {
		return ctx, release
	}
	ctx, cancelBound := context.WithTimeout(ctx, bound)
	return ctx, func() { cancelBound(); release() }
}

// committedRead bounds the read of a task for Committed, made even when
// the request's context has ended.
const committedRead = 10 * time.Second

// Committed is the answer to a request whose effect is durable (its task
// created, its message added, its decision recorded, with the request's
// replay record) when a step after that commit failed with err: the
// agent's Take, the move to working, the outcome of a run. SNAP's
// retryable errors (5001, 5002, 5003) tell the requester that the request
// left no effect and that the same message may be sent again; its id is
// spent here, and the retry would be refused as a duplicate (2006), the
// requester never learning of its task. So the failure is logged and the
// task taskID is returned as it now stands (last, when not nil, if it
// cannot be read; else nil and err), for the requester to follow with
// tasks/get. What failed is taken up by the node's reconcile passes: a
// task left submitted or working is resumed (Service.Resume), one waiting
// for input whose held action was decided takes the decision's outcome,
// and the agent reconciles its jobs.
func (s *Service) Committed(ctx context.Context, taskID string, last *Task, step string, err error) (*Task, error) {
	if errors.Is(err, snap.ErrClaimTaken) {
		return nil, err // a duplicate: the effect is another request's
	}
	s.log.Error("tasks: a step after the request's commit failed; it is answered with the task as it stands",
		"task", taskID, "step", step, "err", err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), committedRead)
	defer cancel()
	cur, gerr := s.store.Get(rctx, taskID)
	switch {
	case gerr == nil:
		return cur, nil
	case last != nil:
		return last, nil
	case errors.Is(gerr, ErrNotFound):
		return nil, notFound(taskID)
	}
	return nil, err
}

// receive records the message: a new task (failed at once when refusal
// is set), or the next message of one, with its idempotency key when
// keyed.
func (s *Service) receive(ctx context.Context, owner string, req *SendParams, refusal *Refusal, keyed bool) (*Task, error) {
	if req.TaskID == "" {
		return s.create(ctx, owner, req, refusal)
	}
	ctx, done, err := s.claimAppend(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.change(ctx, req.TaskID, func(cur *Task) (*Task, error) {
		if cur.Owner != owner {
			return nil, notFound(req.TaskID)
		}
		if st := cur.Status.State; st.Terminal() {
			return nil, snap.FieldError(root+".taskId", "state",
				[]string{string(StateSubmitted), string(StateWorking), string(StateInputRequired)}, string(st))
		}
		if len(cur.History) >= s.maxHistory {
			return nil, snap.FieldError(root+".taskId", "maxHistory", s.maxHistory, len(cur.History)+1)
		}
		if keyed {
			// One write: the message, the key, and working again when
			// the task waited for input.
			t, err := s.store.AppendKeyed(ctx, cur.ID, cur.Version, req.IdempotencyKey, req.Message, s.timestamp())
			if err != nil {
				return nil, fmt.Errorf("tasks: send message: %w", err)
			}
			if StatusChanged(cur, t) {
				s.publishStatus(ctx, t)
			}
			return t, nil
		}
		if cur.Status.State != StateInputRequired {
			t, err := s.store.AppendHistory(ctx, cur.ID, cur.Version, req.Message)
			if err != nil {
				return nil, fmt.Errorf("tasks: send message: %w", err)
			}
			return t, nil
		}
		cur.History = append(cur.History, req.Message)
		return s.setStatus(ctx, cur, StateWorking, "", "send message")
	})
}

// claimAppend readies ctx for the write of a message to an existing
// task. When the server left the request's replay record to the handler
// (snap.ReplayClaim) and the store writes it with a change (ClaimWriter),
// the record goes in the append's own transaction, as a new task's does
// with the task: an append that fails (the database busy, a connection
// lost) leaves the request's id unspent, so that the requester's retry
// is processed, and one that commits spends it. Otherwise the record is
// written now, before the append, and the request's id is spent: a
// requester who stops waiting (its context canceled) must not leave its
// message unapplied, as a retry of the same id is a duplicate, so the
// append goes on without the request's cancellation, bounded by
// claimedWrite. done releases the context.
func (s *Service) claimAppend(ctx context.Context) (_ context.Context, done func(), _ error) {
	r, ok := ctx.Value(requestKey{}).(*snap.Verified)
	if cw, writes := s.store.(ClaimWriter); ok && writes && r.Claim.Pending() {
		return cw.WithClaim(ctx, r.Claim), func() {}, nil
	}
	if err := rememberClaim(ctx); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimedWrite)
	return ctx, cancel, nil
}

// claimedWrite bounds the write of a message whose request's replay
// record is written already (see claimAppend).
const claimedWrite = 30 * time.Second

// create stores a new task with the message of req, failed already with
// refusal's reason when the agent refused it before it was stored (see
// Screener).
func (s *Service) create(ctx context.Context, owner string, req *SendParams, refusal *Refusal) (*Task, error) {
	now := s.timestamp()
	t := &Task{
		ID:             s.newID(),
		ContextID:      s.newID(),
		Status:         Status{State: StateSubmitted, Timestamp: now},
		History:        []Message{req.Message},
		Owner:          owner,
		IdempotencyKey: req.IdempotencyKey,
		CreatedAt:      now,
	}
	if refusal != nil {
		// Refused before it was stored: created failed, in one write.
		t.Status = Status{State: StateFailed, Timestamp: now, Message: textcut.Prefix(dbtext.Clean(refusal.Reason), MaxStatusMessage)}
	}
	created, err := s.insert(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("tasks: send message: %w", err)
	}
	s.publishStatus(ctx, created)
	return created, nil
}

// insert stores the new task t. When t comes from a message/send request
// and results are kept (ServiceOptions.KeepResults), the answer carrying
// t is kept as the request's result in the same write, and the server
// told so; so is the request's replay record when the server left it
// to the handler (snap.ReplayClaim), and the task is stored only if the
// record is fresh. A MemoryStore writes the record in its Create, once
// the live-task limits and its bound let the task in (claimCreator);
// another store that keeps no results has the record written first.
func (s *Service) insert(ctx context.Context, t *Task) (*Task, error) {
	r, ok := ctx.Value(requestKey{}).(*snap.Verified)
	rk, keeps := s.store.(ResultKeeper)
	if !ok || !keeps || s.keep <= 0 {
		if cc, claims := s.store.(claimCreator); ok && claims && r.Claim.Pending() {
			return cc.createClaiming(ctx, t, r.Claim)
		}
		if err := rememberClaim(ctx); err != nil {
			return nil, err
		}
		return s.store.Create(ctx, t)
	}
	b, err := NewTaskResponse(t).AppendCanonicalJSON(make([]byte, 0, 1024))
	if err != nil { // as the Server would answer it
		if b, err = json.Marshal(NewTaskResponse(t)); err == nil {
			b, err = snap.Canonicalize(b)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: result: %w", t.ID, err)
	}
	kept := KeptResult{From: r.From, RequestID: r.ID, Result: b, Expires: s.now().Add(s.keep)}
	if r.Claim.Pending() {
		kept.Claim = r.Claim
	} else if err := r.Claim.Remember(ctx); err != nil {
		return nil, err // settled already, as a duplicate: nothing is stored
	}
	created, err := rk.CreateKeeping(ctx, t, kept)
	if err == nil {
		snap.ResultKept(ctx, b)
	}
	return created, err
}

// claimCreator is a store that writes a request's pending replay record
// in its Create, after the checks that may refuse the task (see
// MemoryStore.createClaiming).
type claimCreator interface {
	createClaiming(ctx context.Context, t *Task, claim *snap.ReplayClaim) (*Task, error)
}

// requestKey is the context key of the message/send request a handler
// serves, for ServiceOptions.KeepResults and its replay claim.
type requestKey struct{}

// rememberClaim writes the replay record of the request ctx serves if
// the server left it to the handler and it is still pending; an error
// (snap.ErrClaimTaken for a duplicate) means that the request must have
// no effect.
func rememberClaim(ctx context.Context) error {
	if r, ok := ctx.Value(requestKey{}).(*snap.Verified); ok {
		return r.Claim.Remember(ctx)
	}
	return nil
}

// change runs write on the current task under the task's lock, again when
// it fails with a version conflict (another process wrote first). A task
// that does not exist is 1001. A task it leaves ended goes to
// ServiceOptions.Ended once the lock is released.
func (s *Service) change(ctx context.Context, id string, write func(cur *Task) (*Task, error)) (*Task, error) {
	t, err := s.changeLocked(ctx, id, write)
	if err == nil {
		s.ended(ctx, t)
	}
	return t, err
}

// ended calls ServiceOptions.Ended with t when t has ended.
func (s *Service) ended(ctx context.Context, t *Task) {
	if s.onEnded != nil && t != nil && t.Status.State.Terminal() {
		s.onEnded(ctx, t)
	}
}

// changeLocked is change under the task's lock.
func (s *Service) changeLocked(ctx context.Context, id string, write func(cur *Task) (*Task, error)) (*Task, error) {
	defer s.lockTask(id).Unlock()
	for attempt := 1; ; attempt++ {
		cur, err := s.store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return nil, notFound(id)
		}
		if err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
		t, err := write(cur)
		if errors.Is(err, ErrVersionConflict) && attempt < conflictRetries {
			continue
		}
		return t, err
	}
}

// publishStatus hands the event the store recorded with t's status change
// to the subscribers (see publishLocal).
func (s *Service) publishStatus(ctx context.Context, t *Task) {
	s.publishLocal(ctx, t.ID, StatusEvent(t))
}

// setStatus stores cur (read at its Version, possibly with other changes
// already made to it) with the status state and note (made dbtext.Clean)
// timestamped now, and publishes the new status; op names the operation
// in the error.
func (s *Service) setStatus(ctx context.Context, cur *Task, state State, note, op string) (*Task, error) {
	cur.Status = Status{State: state, Timestamp: s.timestamp(), Message: dbtext.Clean(note)}
	t, err := s.store.Update(ctx, cur, cur.Version)
	if err != nil {
		return nil, fmt.Errorf("tasks: %s: %w", op, err)
	}
	s.publishStatus(ctx, t)
	return t, nil
}

// GetTask handles a tasks/get request from requester. The task must be the
// requester's or the requester an operator, else 1001. historyLength
// omitted returns the whole history, 0 none, N the last N messages.
func (s *Service) GetTask(ctx context.Context, requester string, req *GetParams) (*Task, error) {
	t, err := s.store.Get(ctx, req.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(req.TaskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: get task: %w", err)
	}
	if !s.canRead(requester, t) {
		return nil, notFound(req.TaskID)
	}
	if req.HistoryLength != nil {
		t = t.TrimHistory(*req.HistoryLength)
	}
	return t, nil
}

// CancelTask handles a tasks/cancel request from requester, the task's
// owner or an operator (else 1001). A task already canceled is returned as
// it is (cancel is idempotent); a completed or failed one is 1002 with data
// {taskId, state}; any other moves to canceled.
//
// When the request's replay record is left to its handler
// (snap.ReplayClaim, through the context Register's handler passes), the
// cancel's write carries it, as a message's append does (see
// claimAppend); a cancel that writes nothing leaves it to the server.
func (s *Service) CancelTask(ctx context.Context, requester string, req *CancelParams) (*Task, error) {
	ctx, done, err := s.claimAppend(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.change(ctx, req.TaskID, func(cur *Task) (*Task, error) {
		if !s.canRead(requester, cur) {
			return nil, notFound(req.TaskID)
		}
		switch st := cur.Status.State; st {
		case StateCanceled:
			return cur, nil
		case StateCompleted, StateFailed:
			return nil, snap.NewError(snap.CodeTaskNotCancelable, "task is "+string(st)+" and cannot be canceled",
				map[string]any{"taskId": req.TaskID, "state": string(st)})
		}
		note := "canceled by the requester"
		if cur.Owner != requester {
			note = "canceled by an operator"
		}
		return s.setStatus(ctx, cur, StateCanceled, note, "cancel task")
	})
}

// Transition moves a task to another state for a worker or the executor,
// with an optional note (at most 1024 characters). It enforces the state
// machine (ErrIllegalTransition, ErrTerminal) but no ownership; a missing
// task is a *snap.Error 1001.
func (s *Service) Transition(ctx context.Context, taskID string, to State, note string) (*Task, error) {
	return s.change(ctx, taskID, func(cur *Task) (*Task, error) {
		if cur.Status.State.Terminal() {
			return nil, fmt.Errorf("tasks: transition %s to %s: %w: %w", taskID, to, ErrTerminal, ErrIllegalTransition)
		}
		if err := CheckTransition(cur.Status.State, to); err != nil {
			return nil, fmt.Errorf("tasks: transition %s: %w", taskID, err)
		}
		return s.setStatus(ctx, cur, to, note, "transition")
	})
}

// AddArtifact adds an artifact to a task that is not terminal, for a worker
// or the executor. The artifact is validated first (a *snap.Error 1004 on
// a field under "artifact"); ErrTerminal, ErrLimit and ErrExists come from
// the store; a missing task is a *snap.Error 1001.
func (s *Service) AddArtifact(ctx context.Context, taskID string, a Artifact) (*Task, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return s.change(ctx, taskID, func(cur *Task) (*Task, error) {
		t, err := s.store.AppendArtifact(ctx, taskID, cur.Version, a)
		if err != nil {
			return nil, fmt.Errorf("tasks: add artifact: %w", err)
		}
		s.publishLocal(ctx, t.ID, ArtifactEvent(t.ID, t.Version, a))
		return t, nil
	})
}

// Subscribe returns the task as it is now and a channel of its later
// events, with no gap or overlap between the two for writes made through
// this Service. The requester must own the task or be an operator (else
// 1001). The channel is closed when ctx is done, after the final event, or
// when the subscriber falls behind; for a terminal task it is closed at once.
func (s *Service) Subscribe(ctx context.Context, requester, taskID string) (*Task, <-chan Event, error) {
	defer s.lockTask(taskID).Unlock()
	t, err := s.store.Get(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, notFound(taskID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tasks: subscribe: %w", err)
	}
	if !s.canRead(requester, t) {
		return nil, nil, notFound(taskID)
	}
	if t.Status.State.Terminal() {
		return t, closedEvents(), nil
	}
	return t, s.events.SubscribeAfter(ctx, taskID, t.Version), nil
}

// Pages of a resubscription's backlog (Resubscribe): the events one read
// of the store holds, and the bytes of content past which it holds no
// more (Store.EventsPage).
const (
	backlogPageEvents = 16
	backlogPageBytes  = 1 << 20
)

// Resubscribe is Subscribe for a requester that saw the task's events up to
// version after: it also returns the stored events after that version up
// to the task's, and the channel carries what follows them, with no gap
// or duplicate between the two. after = 0 replays every event from the
// creation on. The backlog is read from the store in pages as it is
// ranged over (the first page now), a bounded number of events and
// bytes at a time, however many the task holds; an error ends it (a task
// deleted since, by the retention, a 1001). It can be ranged over once.
func (s *Service) Resubscribe(ctx context.Context, requester, taskID string, after int64) (*Task, iter.Seq2[Event, error], <-chan Event, error) {
	defer s.lockTask(taskID).Unlock()
	t, err := s.store.Get(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil, notFound(taskID)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tasks: resubscribe: %w", err)
	}
	if !s.canRead(requester, t) {
		return nil, nil, nil, notFound(taskID)
	}
	first, err := s.backlogPage(ctx, taskID, after)
	if err != nil {
		return nil, nil, nil, err
	}
	backlog := s.backlog(ctx, taskID, first, t.Version)
	if t.Status.State.Terminal() {
		return t, backlog, closedEvents(), nil
	}
	return t, backlog, s.events.SubscribeAfter(ctx, taskID, t.Version), nil
}

// backlog yields the events of first and those that follow it in the
// store, read a page at a time, up to version upTo: the events after it
// come through the subscription. The events up to upTo are stored
// already and never change, so the pages after the first are read
// without the task's lock.
func (s *Service) backlog(ctx context.Context, taskID string, first []Event, upTo int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		page := first
		for len(page) > 0 {
			var last int64
			for _, ev := range page {
				if ev.Version > upTo {
					return
				}
				if !yield(ev, nil) {
					return
				}
				last = ev.Version
			}
			if last >= upTo {
				return
			}
			var err error
			if page, err = s.backlogPage(ctx, taskID, last); err != nil {
				yield(Event{}, err)
				return
			}
		}
	}
}

// backlogPage reads the page of the task's events after version after.
func (s *Service) backlogPage(ctx context.Context, taskID string, after int64) ([]Event, error) {
	evs, err := s.store.EventsPage(ctx, taskID, after, backlogPageEvents, backlogPageBytes)
	if errors.Is(err, ErrNotFound) { // the retention deleted it since
		return nil, notFound(taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: resubscribe: %w", err)
	}
	return evs, nil
}

// TaskEvents returns the stored events of a task the requester may read,
// after version after (1001 otherwise).
func (s *Service) TaskEvents(ctx context.Context, requester, taskID string, after int64) ([]Event, error) {
	t, err := s.store.Get(ctx, taskID)
	if errors.Is(err, ErrNotFound) || (err == nil && !s.canRead(requester, t)) {
		return nil, notFound(taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: events: %w", err)
	}
	evs, err := s.store.Events(ctx, taskID, after)
	if errors.Is(err, ErrNotFound) { // the retention deleted it since
		return nil, notFound(taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: events: %w", err)
	}
	return evs, nil
}

// Registrar is where the Service registers its protocol handlers: the
// node's router (snap.Router). A handler's result is the response
// payload; its error is a *snap.Error. Streaming handlers emit event
// payloads, in order, before their final result.
type Registrar interface {
	Handle(method string, h func(ctx context.Context, req *snap.Verified) (any, error))
	HandleStream(method string, h snap.StreamHandlerFunc)
}

// Interceptor sees each message/send and message/stream request before
// the Service does, with the params the router decoded: when it reports
// handled, its answer (resp, or err as a *snap.Error) is the request's
// and the Service does nothing with it. The node answers an operator's
// decision on a held action so. An Interceptor that acts must write the
// request's replay record with its first effect (Service.TxClaim, in
// that effect's commit) or before it (req.Claim.Remember), and do
// nothing when that fails.
type Interceptor func(ctx context.Context, req *snap.Verified, p *SendParams) (resp any, handled bool, err error)

// Register registers the handlers of message/send, tasks/get,
// tasks/cancel, message/stream and tasks/resubscribe (see StreamMessage
// and StreamResubscribe) on r. Each request's payload is decoded and
// validated once, by snap's wire codec, into the params the Service's
// methods take; intercept, when not nil, sees message/send and
// message/stream first. The requester is the request's authenticated
// from; a success is a *TaskResponse (a snap.Shrinker) whose task has no
// Metadata; a failure is a *snap.Error (5001, without details, for
// internal failures).
func (s *Service) Register(r Registrar, intercept Interceptor) {
	send := func(ctx context.Context, req *snap.Verified, p *SendParams) (any, error) {
		// A request's replay record may be left to this handler
		// (snap.ReplayClaim): written with the task it creates or the
		// message it appends, or before any other effect (see insert,
		// claimAppend, and the Interceptor's contract). So it may be
		// for message/stream (written as here, and before the first
		// event), tasks/cancel (with the cancel's write) and
		// tasks/resubscribe (before the first event); tasks/get, which
		// changes nothing, leaves it to the server.
		if resp, ok, err := intercepted(ctx, intercept, req, p); ok {
			return resp, err
		}
		t, err := s.SendMessage(context.WithValue(ctx, requestKey{}, req), req.From, p)
		return s.answer("message/send", req, t, err)
	}
	get := func(ctx context.Context, req *snap.Verified, p *GetParams) (any, error) {
		t, err := s.GetTask(ctx, req.From, p)
		return s.answer("tasks/get", req, t, err)
	}
	cancel := func(ctx context.Context, req *snap.Verified, p *CancelParams) (any, error) {
		t, err := s.CancelTask(context.WithValue(ctx, requestKey{}, req), req.From, p)
		return s.answer("tasks/cancel", req, t, err)
	}
	stream := func(ctx context.Context, req *snap.Verified, p *SendParams, emit func(any) error) (any, error) {
		if resp, ok, err := intercepted(ctx, intercept, req, p); ok {
			return resp, err // a decision is answered at once, with no events
		}
		t, err := s.StreamMessage(context.WithValue(ctx, requestKey{}, req), req.From, p, emit)
		return s.answer(snap.MethodMessageStream, req, t, err)
	}
	resubscribe := func(ctx context.Context, req *snap.Verified, p *ResubscribeParams, emit func(any) error) (any, error) {
		t, err := s.StreamResubscribe(context.WithValue(ctx, requestKey{}, req), req.From, p, emit)
		return s.answer(snap.MethodTasksResubscribe, req, t, err)
	}
	r.Handle("message/send", s.checked("message/send", snap.Params(s.parseSend, send)))
	r.Handle("tasks/get", s.checked("tasks/get", snap.Params(snap.ParseGetParams, get)))
	r.Handle("tasks/cancel", s.checked("tasks/cancel", snap.Params(snap.ParseCancelParams, cancel)))
	r.HandleStream(snap.MethodMessageStream, s.checkedStream(snap.MethodMessageStream, snap.StreamParams(s.parseSend, stream)))
	r.HandleStream(snap.MethodTasksResubscribe, s.checkedStream(snap.MethodTasksResubscribe, snap.StreamParams(snap.ParseResubscribeParams, resubscribe)))
}

// intercepted runs intercept, when there is one, on a request that passed
// checkRequest.
func intercepted(ctx context.Context, intercept Interceptor, req *snap.Verified, p *SendParams) (any, bool, error) {
	if intercept == nil {
		return nil, false, nil
	}
	return intercept(ctx, req, p)
}

// checked runs h on requests checkRequest lets through.
func (s *Service) checked(method string, h snap.HandlerFunc) snap.HandlerFunc {
	return func(ctx context.Context, req *snap.Verified) (any, error) {
		if err := s.checkRequest(method, req); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// checkedStream is checked for a streaming handler.
func (s *Service) checkedStream(method string, h snap.StreamHandlerFunc) snap.StreamHandlerFunc {
	return func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		if err := s.checkRequest(method, req); err != nil {
			return nil, err
		}
		return h(ctx, req, emit)
	}
}

// checkRequest refuses what no handler serves: a missing message, a
// message that is not a request, an unsigned one (ownership rests on an
// authenticated from).
func (s *Service) checkRequest(method string, req *snap.Verified) *snap.Error {
	switch {
	case req == nil || req.Message == nil:
		s.log.Error("tasks: handler called without a message", "method", method)
		return snap.NewError(snap.CodeInternal, "internal error", nil)
	case req.Type != snap.TypeRequest:
		return snap.NewError(snap.CodeInvalidMessage, "only requests are handled",
			map[string]any{"field": "type", "reason": "not a request"})
	case !req.Signed:
		return snap.NewError(snap.CodeSignatureMissing, "a request must be signed",
			map[string]any{"field": "sig", "required": true})
	}
	return nil
}

// answer is a handler's result: the task without Metadata in a
// *TaskResponse, a *snap.Error as it is, any other error as 5001 (logged).
func (s *Service) answer(method string, req *snap.Verified, t *Task, err error) (any, error) {
	if err != nil {
		if errors.Is(err, snap.ErrClaimTaken) {
			return nil, err // a duplicate: the server answers it as one
		}
		var se *snap.Error
		if errors.As(err, &se) {
			return nil, se
		}
		s.failedLog.Log(context.Background(), s.log, s.now(), slog.LevelError, "tasks: request failed", "method", method, "from", req.From, "id", req.ID, "err", err)
		return nil, snap.NewError(snap.CodeInternal, "internal error", nil)
	}
	return NewTaskResponse(t), nil
}

// NewTaskResponse is the response carrying t to its requester: without
// node-local metadata.
func NewTaskResponse(t *Task) *TaskResponse { return &TaskResponse{Task: forPeer(t)} }

// forPeer returns t as a peer may see it: without node-local metadata.
func forPeer(t *Task) *Task {
	if t.Metadata == nil {
		return t
	}
	c := *t
	c.Metadata = nil
	return &c
}

// List returns the tasks matching f, oldest first: for operators and
// their commands, not for peers (no ownership check).
func (s *Service) List(ctx context.Context, f Filter) ([]*Task, error) {
	return s.store.List(ctx, f)
}
