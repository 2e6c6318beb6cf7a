package tasks

import (
	"context"
	"fmt"
	"sync"

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
}

// LiveCount counts each owner's live tasks for a store and refuses a new
// one past its LiveLimits: the MemoryStore's bound and the SQL stores'.
// The store calls Take before it stores a live task (and Drop if the
// task is not stored after all), Drop once a live task ended or was
// deleted. An owner with no live task has no entry, so the count holds
// at most as many owners as there are live tasks. A nil *LiveCount, or
// one whose limits are zero, counts nothing and refuses nothing. It is
// safe for concurrent use.
type LiveCount struct {
	lim LiveLimits

	mu   sync.Mutex
	live map[string]int
	sum  int
	// changes holds what Take and Drop did while a Recount's query ran,
	// to add to what it read (recounting tells that one runs).
	recounting bool
	changes    map[string]int

	recount sync.Mutex // one Recount at a time
}

// NewLiveCount returns a count bounded by lim, with no task counted; it
// returns nil (which counts nothing) when lim bounds nothing.
func NewLiveCount(lim LiveLimits) *LiveCount {
	lim.PerOwner, lim.Total = max(lim.PerOwner, 0), max(lim.Total, 0)
	if lim == (LiveLimits{}) {
		return nil
	}
	return &LiveCount{lim: lim, live: make(map[string]int)}
}

// Take counts a new live task id of owner, or refuses it: an error
// wrapping ErrStoreFull and a *snap.Error, 5002 past LiveLimits.PerOwner,
// 5003 past LiveLimits.Total.
func (c *LiveCount) Take(owner, id string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.live[owner]; c.lim.PerOwner > 0 && n >= c.lim.PerOwner {
		return fmt.Errorf("tasks: create %s: %s holds %d live tasks: %w: %w", id, owner, n, ErrStoreFull,
			snap.LimitReached(snap.CodeRateLimitExceeded, "too many live tasks of this requester; let one end first",
				LiveShareRetryAfter, c.lim.PerOwner, "requester"))
	}
	if c.lim.Total > 0 && c.sum >= c.lim.Total {
		return storeFull(id, c.sum)
	}
	c.addLocked(owner, 1)
	return nil
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

// Of returns owner's live tasks as counted.
func (c *LiveCount) Of(owner string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[owner]
}

// Recount replaces the count with what read returns, each owner's live
// tasks as the store holds them (a store's own count at start, or again
// to catch up with other processes writing to its database). What Take
// and Drop do while read runs is added to what it read: a task whose
// write committed while read ran may be counted once too often, or too
// rarely, until the next Recount.
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
