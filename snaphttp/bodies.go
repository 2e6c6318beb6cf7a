package snaphttp

import (
	"context"
	"net/netip"
	"sync"

	"golang.org/x/sync/semaphore"
)

// bodyBudget bounds the bytes of messages held at once: in all, and per
// peer to a sixteenth of that (at least one message of MaxBody), so that a
// few addresses sending slow bodies cannot hold all of it.
type bodyBudget struct {
	all     *semaphore.Weighted
	perPeer int64

	mu    sync.Mutex
	peers map[netip.Addr]*peerBudget // peers holding or waiting; removed when neither
}

type peerBudget struct {
	sem  *semaphore.Weighted
	refs int // holders and waiters
}

// newBodyBudget bounds the bytes held to total, a peer's to a sixteenth
// of it or maxBody, whichever is larger.
func newBodyBudget(total, maxBody int64) *bodyBudget {
	return &bodyBudget{all: semaphore.NewWeighted(total), perPeer: max(total/16, maxBody), peers: make(map[netip.Addr]*peerBudget)}
}

// ref returns key's budget, counting one more user of it.
func (b *bodyBudget) ref(key netip.Addr) *peerBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[key]
	if p == nil {
		p = &peerBudget{sem: semaphore.NewWeighted(b.perPeer)}
		b.peers[key] = p
	}
	p.refs++
	return p
}

func (b *bodyBudget) unref(key netip.Addr, p *peerBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.refs--; p.refs == 0 {
		delete(b.peers, key)
	}
}

// tryAcquire takes n bytes for key's message, or fails at once, naming
// the scope that has not that much free: "peer" (key's share) or "node".
func (b *bodyBudget) tryAcquire(key netip.Addr, n int64) (scope string) {
	p := b.ref(key)
	scope = "peer"
	if p.sem.TryAcquire(n) {
		if b.all.TryAcquire(n) {
			return ""
		}
		p.sem.Release(n)
		scope = "node"
	}
	b.unref(key, p)
	return scope
}

// acquire takes n bytes for key's message, waiting until they are free or
// ctx ends.
func (b *bodyBudget) acquire(ctx context.Context, key netip.Addr, n int64) error {
	p := b.ref(key)
	if err := p.sem.Acquire(ctx, n); err != nil {
		b.unref(key, p)
		return err
	}
	if err := b.all.Acquire(ctx, n); err != nil {
		p.sem.Release(n)
		b.unref(key, p)
		return err
	}
	return nil
}

// shrink gives back n of the bytes key holds for one message, which it
// keeps holding the rest of.
func (b *bodyBudget) shrink(key netip.Addr, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	p := b.peers[key]
	b.mu.Unlock()
	p.sem.Release(n)
	b.all.Release(n)
}

// release gives back the n bytes of one of key's messages.
func (b *bodyBudget) release(key netip.Addr, n int64) {
	b.mu.Lock()
	p := b.peers[key]
	b.mu.Unlock()
	p.sem.Release(n)
	b.all.Release(n)
	b.unref(key, p)
}
