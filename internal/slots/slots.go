package slots

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// Scopes of a *Full: the bound a refused claim hit.
const (
	ScopeIdentity  = "requester" // the claim's identity holds PerIdentity slots
	ScopeKey       = "key"       // the claim's key holds PerKey slots
	ScopeNode      = "node"      // every slot is held
	ScopeNewcomers = "newcomers" // newcomers hold MaxNewcomers slots
)

// Limits are the bounds of a Pool.
type Limits struct {
	// Max is the number of slots (at least 1).
	Max int
	// PerIdentity and PerKey bound the slots one identity, and one key,
	// holds or waits for; 0 means Max.
	PerIdentity, PerKey int
	// MaxNewcomers bounds the slots of claims that are not Known,
	// together; 0, or more than Max, means Max.
	MaxNewcomers int
	// Wait is the longest a claim waits for a slot; 0 refuses at once.
	Wait time.Duration
	// MaxWaiting bounds the claims waiting at once, known and newcomers
	// each; past it a claim is refused at once. 0 means none wait.
	MaxWaiting int
}

// Claim is who asks for a slot.
type Claim struct {
	Identity string
	Key      string
	// Known claimants are served before newcomers and do not count
	// against MaxNewcomers.
	Known bool
}

// Full is the error of a refused claim: Scope is the bound it hit (one of
// the Scope constants) and Limit its value.
type Full struct {
	Scope string
	Limit int
}

func (e *Full) Error() string {
	return fmt.Sprintf("slots: no slot free (%s bound of %d)", e.Scope, e.Limit)
}

// Pool hands out slots. It is safe for concurrent use.
type Pool struct {
	lim Limits

	mu         sync.Mutex
	open       int            // slots held
	newcomers  int            // slots held by claims not Known
	byIdentity map[string]int // slots held or waited for; entries > 0 only
	byKey      map[string]int
	known      list.List // of *waiter, FIFO
	fresh      list.List
}

type waiter struct {
	claim   Claim
	ready   chan struct{} // closed when granted
	granted bool
}

// New returns a Pool with the limits l.
func New(l Limits) *Pool {
	l.Max = max(l.Max, 1)
	if l.PerIdentity <= 0 {
		l.PerIdentity = l.Max
	}
	if l.PerKey <= 0 {
		l.PerKey = l.Max
	}
	if l.MaxNewcomers <= 0 || l.MaxNewcomers > l.Max {
		l.MaxNewcomers = l.Max
	}
	return &Pool{lim: l, byIdentity: make(map[string]int), byKey: make(map[string]int)}
}

// Limits returns the pool's limits, defaults applied.
func (p *Pool) Limits() Limits { return p.lim }

// Acquire takes a slot for c, waiting up to Limits.Wait for one when none
// is free, and returns the function that gives it back (once; later calls
// do nothing). It fails with a *Full when the claim's identity or key
// already holds its share (at once), or when no slot came in time, or the
// queue of waiting claims was full; with ctx's error when ctx ended while
// it waited.
func (p *Pool) Acquire(ctx context.Context, c Claim) (release func(), err error) {
	p.mu.Lock()
	switch {
	case p.byIdentity[c.Identity] >= p.lim.PerIdentity:
		p.mu.Unlock()
		return nil, &Full{ScopeIdentity, p.lim.PerIdentity}
	case p.byKey[c.Key] >= p.lim.PerKey:
		p.mu.Unlock()
		return nil, &Full{ScopeKey, p.lim.PerKey}
	}
	queue := &p.fresh
	if c.Known {
		queue = &p.known
	}
	// A claim goes before no one waiting ahead of it: newcomers wait
	// behind every waiting claim, known ones behind known ones.
	ahead := p.known.Len()
	if !c.Known {
		ahead += p.fresh.Len()
	}
	if ahead == 0 && p.fits(c.Known) {
		p.count(c, 1)
		p.take(c)
		p.mu.Unlock()
		return p.releaser(c), nil
	}
	if p.lim.Wait <= 0 || queue.Len() >= p.lim.MaxWaiting {
		full := p.full(c.Known)
		p.mu.Unlock()
		return nil, full
	}
	w := &waiter{claim: c, ready: make(chan struct{})}
	e := queue.PushBack(w)
	p.count(c, 1)
	p.mu.Unlock()

	timer := time.NewTimer(p.lim.Wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return p.releaser(c), nil
	case <-timer.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted { // between the wake-up and the lock
		return p.releaser(c), nil
	}
	queue.Remove(e)
	p.count(c, -1)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("slots: waiting for a slot: %w", ctx.Err())
	}
	return nil, p.full(c.Known)
}

// fits reports whether a slot is free for a claim. p.mu is held.
func (p *Pool) fits(known bool) bool {
	return p.open < p.lim.Max && (known || p.newcomers < p.lim.MaxNewcomers)
}

// full is the refusal of a claim that found no slot. p.mu is held.
func (p *Pool) full(known bool) *Full {
	if p.open >= p.lim.Max || known {
		return &Full{ScopeNode, p.lim.Max}
	}
	return &Full{ScopeNewcomers, p.lim.MaxNewcomers}
}

// count adds d to the claim's identity and key. p.mu is held.
func (p *Pool) count(c Claim, d int) {
	for _, m := range []struct {
		by map[string]int
		k  string
	}{{p.byIdentity, c.Identity}, {p.byKey, c.Key}} {
		if m.by[m.k] += d; m.by[m.k] <= 0 {
			delete(m.by, m.k)
		}
	}
}

// take counts a slot held by c. p.mu is held.
func (p *Pool) take(c Claim) {
	p.open++
	if !c.Known {
		p.newcomers++
	}
}

func (p *Pool) releaser(c Claim) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.open--
			if !c.Known {
				p.newcomers--
			}
			p.count(c, -1)
			p.handOff()
		})
	}
}

// handOff gives the free slots to the waiting claims, known ones first.
// p.mu is held.
func (p *Pool) handOff() {
	for _, q := range []*list.List{&p.known, &p.fresh} {
		for q.Len() > 0 {
			w := q.Front().Value.(*waiter)
			if !p.fits(w.claim.Known) {
				return // newcomers wait while a known claim does
			}
			q.Remove(q.Front())
			p.take(w.claim)
			w.granted = true
			close(w.ready)
		}
	}
}

// Stats are the pool's counts.
type Stats struct {
	Open, Newcomers, WaitingKnown, WaitingNewcomers, Identities, Keys int
}

// Stats returns the pool's counts now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{p.open, p.newcomers, p.known.Len(), p.fresh.Len(), len(p.byIdentity), len(p.byKey)}
}
