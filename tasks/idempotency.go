package tasks

import (
	"errors"
	"slices"
	"sync"
)

// ErrKeyKept: the idempotency key sent with a message to a task is kept
// already (Store.AppendKeyed); errors wrapping it are *KeyKeptError.
var ErrKeyKept = errors.New("idempotency key already kept")

// KeyKeptError is Store.AppendKeyed's refusal of a key the task's owner
// already kept: TaskID is the task it was kept with, the one a retry of
// the message continued.
type KeyKeptError struct {
	Owner, Key, TaskID string
}

func (e *KeyKeptError) Error() string {
	return "tasks: idempotency key " + e.Key + " of " + e.Owner + " kept with task " + e.TaskID + ": " + ErrKeyKept.Error()
}

// Is makes a *KeyKeptError ErrKeyKept.
func (e *KeyKeptError) Is(target error) bool { return target == ErrKeyKept }

// idemKey scopes an idempotency key to its requester: two requesters may
// use the same key for different tasks.
type idemKey struct{ owner, key string }

// keyCache maps idempotency keys to task ids, forgetting the oldest key
// first once it holds its capacity.
type keyCache struct {
	mu    sync.Mutex
	cap   int
	seq   uint64
	m     map[idemKey]keyEntry
	order []keyRef // insertion order from head on; stale refs are skipped
	head  int
}

type keyEntry struct {
	id  string
	seq uint64
}

type keyRef struct {
	k   idemKey
	seq uint64
}

func newKeyCache(capacity int) *keyCache {
	return &keyCache{cap: capacity, m: make(map[idemKey]keyEntry)}
}

func (c *keyCache) get(k idemKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.id, ok
}

func (c *keyCache) put(k idemKey, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.id = id
		c.m[k] = e
		return
	}
	for len(c.m) >= c.cap && c.head < len(c.order) {
		r := c.order[c.head]
		c.order[c.head] = keyRef{}
		c.head++
		if e, ok := c.m[r.k]; ok && e.seq == r.seq {
			delete(c.m, r.k)
		}
	}
	c.seq++
	c.m[k] = keyEntry{id: id, seq: c.seq}
	c.order = append(c.order, keyRef{k: k, seq: c.seq})
	if c.head > 64 && c.head*2 > len(c.order) || len(c.order) > 2*c.cap+64 {
		live := make([]keyRef, 0, len(c.m))
		for _, r := range c.order[c.head:] {
			if e, ok := c.m[r.k]; ok && e.seq == r.seq {
				live = append(live, r)
			}
		}
		c.order, c.head = slices.Clip(live), 0
	}
}

func (c *keyCache) remove(k idemKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
