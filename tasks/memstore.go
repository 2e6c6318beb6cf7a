package tasks

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// DefaultMaxTasks bounds a MemoryStore whose options set no MaxTasks.
const DefaultMaxTasks = 100_000

// DefaultMaxLivePerOwner is the share of a node's memory store one
// requester's live tasks may take: a hundredth of DefaultMaxTasks.
const DefaultMaxLivePerOwner = DefaultMaxTasks / 100

// MemoryStoreOptions configure a MemoryStore. The zero value is usable.
type MemoryStoreOptions struct {
	// MaxTasks is the most tasks held at once; 0 (or less) means
	// DefaultMaxTasks.
	MaxTasks int
	// MaxLivePerOwner is the most live (not terminal) tasks one owner
	// holds at once, so that one requester cannot fill the store with
	// tasks that never end (LiveLimits.PerOwner: the refusal is 5002);
	// 0 (or less) means no bound but MaxTasks.
	MaxLivePerOwner int
	// MaxLive is the most live tasks of all owners together
	// (LiveLimits.Total: the refusal is 5003, as a full store's); 0 (or
	// less) means no bound but MaxTasks.
	MaxLive int
}

// MemoryStore is a Store held in memory, for one process and for tests. It
// holds at most a fixed number of tasks. When it is full, Create evicts the
// task that became terminal first; with no terminal task to evict it refuses
// the new task (ErrStoreFull with a *snap.Error 5003) rather than drop a
// live one.
type MemoryStore struct {
	mu    sync.RWMutex
	max   int
	tasks map[string]*Task
	// events holds each task's events in version order.
	events map[string][]Event
	// terminal holds the terminal tasks in the order they became
	// terminal, from head on; eviction takes them in that order. A
	// terminal task never changes, so an entry is current while it is
	// the task stored under its id: one Prune deleted, or whose id a new
	// task took since, is skipped.
	terminal []*Task
	head     int
	// keys holds the idempotency keys kept with tasks (AppendKeyed),
	// keysOf each task's, to delete them with it.
	keys   map[idemKey]string
	keysOf map[string][]idemKey
	// live counts each owner's tasks that are not terminal, when
	// MaxLivePerOwner or MaxLive bound them (nil otherwise).
	live *LiveCount
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store holding at most opts.MaxTasks
// tasks.
func NewMemoryStore(opts MemoryStoreOptions) *MemoryStore {
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = DefaultMaxTasks
	}
	return &MemoryStore{max: opts.MaxTasks, tasks: make(map[string]*Task), events: make(map[string][]Event),
		keys: make(map[idemKey]string), keysOf: make(map[string][]idemKey),
		live: NewLiveCount(LiveLimits{PerOwner: opts.MaxLivePerOwner, Total: opts.MaxLive})}
}

// Len returns the number of tasks held.
func (s *MemoryStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tasks)
}

// Create implements Store.
func (s *MemoryStore) Create(ctx context.Context, t *Task) (*Task, error) {
	return s.createClaiming(ctx, t, nil)
}

// createClaiming is Create that writes claim's record (Remember) once the
// store has room for t, under the store's lock, and stores t only if
// this request holds the record: a refusal for the live-task limits or a
// full store (5002, 5003) leaves the request's id unspent, so that its
// retry is processed, as the SQL stores' CreateKeeping does. A record
// held by an earlier message gives an error wrapping snap.ErrClaimTaken,
// and nothing is stored. A nil claim writes no record (Create).
func (s *MemoryStore) createClaiming(ctx context.Context, t *Task, claim *snap.ReplayClaim) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: create: %w", err)
	}
	if err := CheckCreate(t); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; ok {
		return nil, fmt.Errorf("tasks: create %s: task %w", t.ID, ErrExists)
	}
	live := !t.Status.State.Terminal()
	if live {
		if err := s.live.Take(t.Owner, t.ID); err != nil {
			return nil, err
		}
	}
	if len(s.tasks) >= s.max && !s.evictLocked() {
		if live {
			s.live.Drop(t.Owner)
		}
		return nil, storeFull(t.ID, len(s.tasks))
	}
	// The record last, once nothing can refuse the task. A terminal
	// task evicted for it stays evicted if the record is refused: it
	// was the next to go.
	if err := claim.Remember(ctx); err != nil {
		if live {
			s.live.Drop(t.Owner)
		}
		return nil, err
	}
	c := t.Clone()
	c.Version = 1
	s.tasks[c.ID] = c
	s.events[c.ID] = []Event{StatusEvent(c)}
	if !live {
		s.terminal = append(s.terminal, c)
	}
	return c.Clone(), nil
}

// evictLocked drops the task that became terminal first (skipping the
// entries of tasks Prune already deleted). It reports false when no task
// is terminal.
func (s *MemoryStore) evictLocked() bool {
	for s.head < len(s.terminal) {
		t := s.terminal[s.head]
		s.terminal[s.head] = nil
		s.head++
		if s.head > 64 && s.head*2 > len(s.terminal) {
			s.terminal = slices.Clone(s.terminal[s.head:])
			s.head = 0
		}
		if s.tasks[t.ID] == t {
			s.deleteLocked(t.ID)
			return true
		}
	}
	return false
}

func (s *MemoryStore) deleteLocked(id string) {
	if t, ok := s.tasks[id]; ok && !t.Status.State.Terminal() {
		s.live.Drop(t.Owner)
	}
	delete(s.tasks, id)
	delete(s.events, id)
	for _, k := range s.keysOf[id] {
		delete(s.keys, k)
	}
	delete(s.keysOf, id)
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, id string) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: get: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("tasks: get %s: %w", id, ErrNotFound)
	}
	return t.Clone(), nil
}

// current returns the stored task id at version expected; s.mu is held.
func (s *MemoryStore) current(op, id string, expected int64) (*Task, error) {
	cur, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("tasks: %s %s: %w", op, id, ErrNotFound)
	}
	if cur.Version != expected {
		return nil, fmt.Errorf("tasks: %s %s: version %d, expected %d: %w", op, id, cur.Version, expected, ErrVersionConflict)
	}
	return cur, nil
}

// unended is current, for a task that has not ended; s.mu is held.
func (s *MemoryStore) unended(op, id string, expected int64) (*Task, error) {
	cur, err := s.current(op, id, expected)
	if err != nil {
		return nil, err
	}
	if cur.Status.State.Terminal() {
		return nil, fmt.Errorf("tasks: %s %s: %s: %w", op, id, cur.Status.State, ErrTerminal)
	}
	return cur, nil
}

// Update implements Store.
func (s *MemoryStore) Update(ctx context.Context, t *Task, expected int64) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: update: %w", err)
	}
	if t == nil {
		return nil, fmt.Errorf("tasks: update nil task: %w", ErrInvalidTask)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current("update", t.ID, expected)
	if err != nil {
		return nil, err
	}
	if err := CheckUpdate(cur, t); err != nil {
		return nil, err
	}
	next := t.Clone()
	next.Owner, next.ContextID, next.IdempotencyKey, next.CreatedAt = cur.Owner, cur.ContextID, cur.IdempotencyKey, cur.CreatedAt
	next.Version = cur.Version + 1
	s.tasks[next.ID] = next
	if StatusChanged(cur, next) {
		s.events[next.ID] = append(s.events[next.ID], StatusEvent(next))
	}
	if next.Status.State.Terminal() && !cur.Status.State.Terminal() {
		s.terminal = append(s.terminal, next)
		s.live.Drop(cur.Owner)
	}
	return next.Clone(), nil
}

// AppendHistory implements Store.
func (s *MemoryStore) AppendHistory(ctx context.Context, id string, expected int64, msgs ...Message) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: append history: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.unended("append history", id, expected)
	if err != nil {
		return nil, err
	}
	// Stored tasks are never handed out, so they may change in place.
	for _, m := range msgs {
		cur.History = append(cur.History, m.Clone())
	}
	cur.Version++
	return cur.Clone(), nil
}

// AppendKeyed implements Store.
func (s *MemoryStore) AppendKeyed(ctx context.Context, id string, expected int64, key string, msg Message, at time.Time) (*Task, error) {
	const op = "append keyed"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: %s: %w", op, err)
	}
	if key == "" || at.IsZero() {
		return nil, fmt.Errorf("tasks: %s %s: no key or no time: %w", op, id, ErrInvalidTask)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("tasks: %s %s: %w", op, id, ErrNotFound)
	}
	k := idemKey{owner: cur.Owner, key: key}
	if kept, ok := s.keys[k]; ok {
		return nil, &KeyKeptError{Owner: k.owner, Key: key, TaskID: kept}
	}
	if cur.Version != expected {
		return nil, fmt.Errorf("tasks: %s %s: version %d, expected %d: %w", op, id, cur.Version, expected, ErrVersionConflict)
	}
	if cur.Status.State.Terminal() {
		return nil, fmt.Errorf("tasks: %s %s: %s: %w", op, id, cur.Status.State, ErrTerminal)
	}
	// Stored tasks are never handed out, so they may change in place.
	cur.History = append(cur.History, msg.Clone())
	cur.Version++
	if cur.Status.State == StateInputRequired {
		cur.Status = Status{State: StateWorking, Timestamp: at.UTC()}
		s.events[id] = append(s.events[id], StatusEvent(cur))
	}
	s.keys[k] = id
	s.keysOf[id] = append(s.keysOf[id], k)
	return cur.Clone(), nil
}

// AppendArtifact implements Store.
func (s *MemoryStore) AppendArtifact(ctx context.Context, id string, expected int64, a Artifact) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: append artifact: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.unended("append artifact", id, expected)
	if err != nil {
		return nil, err
	}
	if len(cur.Artifacts) >= MaxArtifacts {
		return nil, fmt.Errorf("tasks: append artifact %s: %d artifacts already: %w", id, len(cur.Artifacts), ErrLimit)
	}
	for _, have := range cur.Artifacts {
		if have.ArtifactID == a.ArtifactID {
			return nil, fmt.Errorf("tasks: append artifact %s: artifact %s %w", id, a.ArtifactID, ErrExists)
		}
	}
	cur.Artifacts = append(cur.Artifacts, a.Clone())
	cur.Version++
	s.events[id] = append(s.events[id], ArtifactEvent(id, cur.Version, a))
	return cur.Clone(), nil
}

// Apply implements Store.
func (s *MemoryStore) Apply(ctx context.Context, taskID string, out Outcome) (*Task, []Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("tasks: apply: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.tasks[taskID]
	if !ok {
		return nil, nil, fmt.Errorf("tasks: apply %s: %w", taskID, ErrNotFound)
	}
	wasLive := !cur.Status.State.Terminal()
	add, put, evs, err := PlanApply(cur, out)
	if err != nil {
		return nil, nil, err
	}
	if len(evs) == 0 {
		return cur.Clone(), nil, nil // StateKept, nothing to change
	}
	// Stored tasks are never handed out, so they may change in place.
	for _, r := range put {
		cur.Artifacts[r.Index] = r.Artifact.Clone()
	}
	for _, a := range add {
		cur.Artifacts = append(cur.Artifacts, a.Clone())
	}
	last := evs[len(evs)-1]
	if last.Status != nil {
		cur.Status = *last.Status
	}
	cur.Version = last.Version
	pub := make([]Event, len(evs))
	for i, ev := range evs {
		s.events[taskID] = append(s.events[taskID], ev.clone())
		pub[i] = ev.clone()
	}
	if cur.Status.State.Terminal() && wasLive {
		s.terminal = append(s.terminal, cur)
		s.live.Drop(cur.Owner)
	}
	return cur.Clone(), pub, nil
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, f Filter) ([]*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: list: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var hits []*Task
	for _, t := range s.tasks {
		if f.Match(t) {
			hits = append(hits, t)
		}
	}
	slices.SortFunc(hits, func(a, b *Task) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if f.Limit > 0 && len(hits) > f.Limit {
		if f.Newest {
			hits = hits[len(hits)-f.Limit:]
		} else {
			hits = hits[:f.Limit]
		}
	}
	out := make([]*Task, len(hits))
	for i, t := range hits {
		if f.Brief {
			b := *t
			b.History, b.Artifacts = nil, nil
			t = &b
		}
		out[i] = t.Clone()
	}
	return out, nil
}

// CountByState implements Store.
func (s *MemoryStore) CountByState(ctx context.Context) (map[State]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: count: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[State]int64)
	for _, t := range s.tasks {
		out[t.Status.State]++
	}
	return out, nil
}

// Events implements Store: EventsPage with no bound.
func (s *MemoryStore) Events(ctx context.Context, id string, after int64) ([]Event, error) {
	return s.EventsPage(ctx, id, after, math.MaxInt, math.MaxInt)
}

// EventsPage implements Store.
func (s *MemoryStore) EventsPage(ctx context.Context, id string, after int64, limit, maxBytes int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tasks: events: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.tasks[id]; !ok {
		return nil, fmt.Errorf("tasks: events %s: %w", id, ErrNotFound)
	}
	evs := s.events[id]
	i, _ := slices.BinarySearchFunc(evs, after, func(e Event, v int64) int { return cmp.Compare(e.Version, v+1) })
	out := make([]Event, 0, min(len(evs)-i, max(limit, 1), 64))
	size := 0
	for _, e := range evs[i:] {
		if len(out) >= max(limit, 1) || (len(out) > 0 && size >= maxBytes) {
			break
		}
		out = append(out, e.clone())
		size += e.contentSize()
	}
	return out, nil
}

// Prune implements Store.
func (s *MemoryStore) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("tasks: prune: %w", err)
	}
	if limit <= 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*Task
	for _, t := range s.tasks {
		if t.Status.State.Terminal() && t.Status.Timestamp.Before(before) {
			old = append(old, t)
		}
	}
	slices.SortFunc(old, func(a, b *Task) int {
		return cmp.Or(a.Status.Timestamp.Compare(b.Status.Timestamp), cmp.Compare(a.ID, b.ID))
	})
	if len(old) > limit {
		old = old[:limit]
	}
	for _, t := range old {
		s.deleteLocked(t.ID)
	}
	if len(old) > 0 {
		// Drop the pruned tasks from the eviction queue, which a store
		// kept below its bound by Prune never empties.
		s.terminal = slices.DeleteFunc(s.terminal[s.head:], func(t *Task) bool { return t == nil || s.tasks[t.ID] != t })
		s.head = 0
	}
	return len(old), nil
}
