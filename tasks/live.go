package tasks

import (
	"context"
	"fmt"
	"sync"

	"github.com/snapnode/snapnode/internal/slots"
	"github.com/snapnode/snapnode/snap"
)

// DefaultMaxLive is the most live tasks, all requesters together, a node
// takes by default: as many as a MemoryStore holds tasks.
const DefaultMaxLive = DefaultMaxTasks

// LiveShareRetryAfter is the retryAfter, in seconds, of the refusal of a
// requester past LiveLimits.PerOwner.
const LiveShareRetryAfter = 60

// LiveLimits bound the live (not terminal) tasks a store holds, so that
// tasks that never end (proposals waiting for confirmation, free text
// waiting for an answer) cannot take the store. Zero fields bound
// nothing.
type LiveLimits struct {
	// PerOwner is the most live tasks one owner holds at once; past it a
	// new live task of the owner is refused with ErrStoreFull and a
	// *snap.Error 5002 {retryAfter, limit, scope: "requester"}.
	PerOwner int
	// Total is the most live tasks of all owners together; past it a new
	// live task is refused with ErrStoreFull and a *snap.Error 5003, as
	// a full store is.
	Total int
	// Newcomers is the most live tasks of all owners together past which
	// a reservation of an owner that is not known (see Reserve) is
	// refused, with scope "newcomers": it leaves the rest, up to Total,
	// to the owners the node knows. 0 (or Total or more) bounds nothing
	// more than Total. Take is not held to it.
	Newcomers int
}

// LiveCount counts each owner's live tasks for a store and refuses a new
// one past its LiveLimits: the MemoryStore's bound and the SQL stores',
// and the agent's queue's (agent.Queue, whose jobs waiting or worked on
// are its live tasks). The store calls Take before it stores a live task
// (and Drop if the task is not stored after all), Drop once a live task
// ended or was deleted; a bound asked before the task is made holds a
// Reserve until the task is stored (Add) or was not made. An owner with no
// live task and no reservation has no entry, so the count holds at most
// as many owners as there are live tasks and reservations. A nil
// *LiveCount, or one whose limits are zero, counts nothing and refuses
// nothing. It is safe for concurrent use.
type LiveCount struct {
	lim    LiveLimits
	refuse RefuseFunc

	mu   sync.Mutex
	live map[string]int
	sum  int
	// reserved holds the reservations not yet released, by owner
	// (removed at 0), reservedSum all of them; a Recount keeps them.
	reserved    map[string]int
	reservedSum int
	// changes holds what Take and Drop did while a Recount's query ran,
	// to add to what it read (recounting tells that one runs).
	recounting bool
	changes    map[string]int

	recount sync.Mutex // one Recount at a time
}

// RefuseFunc makes a LiveCount's refusal of a new live task of owner (id,
// or "" for a Reserve): scope is "requester" when owner holds
// LiveLimits.PerOwner, "node" when all owners together hold
// LiveLimits.Total, "newcomers" when they hold LiveLimits.Newcomers and
// owner is not known; held is what they hold, limit the bound.
type RefuseFunc func(owner, id, scope string, held, limit int) error

// NewLiveCount returns a count bounded by lim, with no task counted; it
// returns nil (which counts nothing) when lim bounds nothing. Its
// refusals are the task stores': an error wrapping ErrStoreFull and a
// *snap.Error, 5002 {retryAfter, limit, scope: "requester"} past
// LiveLimits.PerOwner, 5003 past LiveLimits.Total.
func NewLiveCount(lim LiveLimits) *LiveCount {
	return NewCount(lim, refuseLive)
}

// NewCount is NewLiveCount with refuse making the refusals.
func NewCount(lim LiveLimits, refuse RefuseFunc) *LiveCount {
	lim.PerOwner, lim.Total, lim.Newcomers = max(lim.PerOwner, 0), max(lim.Total, 0), max(lim.Newcomers, 0)
	if lim.Total > 0 && lim.Newcomers >= lim.Total {
		lim.Newcomers = 0
	}
	if lim == (LiveLimits{}) {
		return nil
	}
	return &LiveCount{lim: lim, refuse: refuse, live: make(map[string]int), reserved: make(map[string]int)}
}

// refuseLive is the task stores' refusal of a new live task.
func refuseLive(owner, id, scope string, held, limit int) error {
	if scope == "node" {
		return storeFull(id, held)
	}
	return fmt.Errorf("tasks: create %s: %s holds %d live tasks: %w: %w", id, owner, held, ErrStoreFull,
		snap.LimitReached(snap.CodeRateLimitExceeded, "too many live tasks of this requester; let one end first",
			LiveShareRetryAfter, limit, "requester"))
}

// Take counts a new live task id of owner, or refuses it (see RefuseFunc)
// when owner's tasks and reservations reach LiveLimits.PerOwner, or all
// of them LiveLimits.Total.
func (c *LiveCount) Take(owner, id string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(owner, id); err != nil {
		return err
	}
	c.addLocked(owner, 1)
	return nil
}

func (c *LiveCount) checkLocked(owner, id string) error {
	if b := c.boundLocked(owner, true); b.scope != "" {
		return c.refuse(owner, id, b.scope, b.held, b.limit)
	}
	return nil
}

// bound is the bound a new live task meets: scope "" when none.
type bound struct {
	scope       string
	held, limit int
}

// boundLocked returns the bound a new live task of owner meets, known
// or not (see LiveLimits.Newcomers). c.mu is held.
func (c *LiveCount) boundLocked(owner string, known bool) bound {
	if n := c.live[owner] + c.reserved[owner]; c.lim.PerOwner > 0 && n >= c.lim.PerOwner {
		return bound{"requester", n, c.lim.PerOwner}
	}
	n := c.sum + c.reservedSum
	if c.lim.Total > 0 && n >= c.lim.Total {
		return bound{"node", n, c.lim.Total}
	}
	if !known && c.lim.Newcomers > 0 && n >= c.lim.Newcomers {
		return bound{ScopeNewcomers, n, c.lim.Newcomers}
	}
	return bound{}
}

// ScopeNewcomers is the scope of a refusal past LiveLimits.Newcomers, as
// of the stream slots' share of newcomers.
const ScopeNewcomers = slots.ScopeNewcomers

// Reserve holds a place for a live task of owner about to be made, or
// refuses it as Take does, and past LiveLimits.Newcomers when owner is not
// known: the reservation counts as a live task until release is called
// (once; later calls do nothing), by which time the task is counted as
// stored (Add) or was not made. A Recount keeps it. known, which may
// look owner up (nil: not known), is asked only when the newcomers'
// bound is the one owner meets, without the count's lock held; the
// bounds are checked again after it, so that reservations made at once
// do not pass them. A nil count reserves nothing.
func (c *LiveCount) Reserve(owner string, known func() bool) (release func(), err error) {
	if c == nil {
		return func() {}, nil
	}
	release, b := c.reserve(owner, false)
	if b.scope == ScopeNewcomers && known != nil {
		// Asked without the lock held: it may read the database.
		release, b = c.reserve(owner, known())
	}
	if b.scope != "" {
		return nil, c.refuse(owner, "", b.scope, b.held, b.limit)
	}
	return release, nil
}

// reserve holds a place for owner, known or not, and returns its release,
// or the bound met (and no release).
func (c *LiveCount) reserve(owner string, known bool) (release func(), met bound) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.boundLocked(owner, known); b.scope != "" {
		return nil, b
	}
	c.reserved[owner]++
	c.reservedSum++
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.reserved[owner]--; c.reserved[owner] <= 0 {
			delete(c.reserved, owner)
		}
		c.reservedSum--
	}), bound{}
}

// storeFull is the refusal of a new task id by a store holding n live
// tasks, as many as it may.
func storeFull(id string, n int) error {
	return fmt.Errorf("tasks: create %s: %d live tasks: %w: %w", id, n, ErrStoreFull,
		snap.NewError(snap.CodeServiceUnavailable, "task store full; retry later",
			map[string]any{"reason": "the node holds as many live tasks as it may"}))
}

// Add counts a live task of owner whatever the limits: one the store
// took without asking (an operator's import).
func (c *LiveCount) Add(owner string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(owner, 1)
}

// Drop uncounts a live task of owner: it ended, was deleted, or was not
// stored after Take.
func (c *LiveCount) Drop(owner string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(owner, -1)
}

func (c *LiveCount) addLocked(owner string, d int) {
	if c.recounting {
		c.changes[owner] += d
	}
	old := c.live[owner]
	n := max(old+d, 0) // below zero: a task counted by another process
	c.sum += n - old
	if n > 0 {
		c.live[owner] = n
	} else {
		delete(c.live, owner)
	}
}

// Of returns owner's live tasks as counted, reservations left out.
func (c *LiveCount) Of(owner string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[owner]
}

// Sum returns all owners' live tasks as counted, reservations left out.
func (c *LiveCount) Sum() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}

// Recount replaces the count with what read returns, each owner's live
// tasks as the store holds them (a store's own count at start, or again
// to catch up with other processes writing to its database). What Take
// and Drop do while read runs is added to what it read: a task whose
// write committed while read ran may be counted once too often, or too
// rarely, until the next Recount. Reservations are not read: they stay.
func (c *LiveCount) Recount(ctx context.Context, read func(ctx context.Context) (map[string]int, error)) error {
	if c == nil {
		return nil
	}
	c.recount.Lock()
	defer c.recount.Unlock()
	c.mu.Lock()
	c.recounting, c.changes = true, make(map[string]int)
	c.mu.Unlock()
	counts, err := read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	changes := c.changes
	c.recounting, c.changes = false, nil
	if err != nil {
		return fmt.Errorf("tasks: count live tasks: %w", err)
	}
	if counts == nil {
		counts = make(map[string]int)
	}
	for owner, d := range changes {
		counts[owner] += d
	}
	c.live, c.sum = make(map[string]int, len(counts)), 0
	for owner, n := range counts {
		if n > 0 {
			c.live[owner] = n
			c.sum += n
		}
	}
	return nil
}
