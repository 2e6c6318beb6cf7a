package embedded

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errBusy: a peer's turns to query the store were all taken for as long
// as its REQ could wait.
var errBusy = errors.New("too many queries at once")

// querySlots bounds the store queries each peer runs at once (see
// Config.MaxQueriesPerIP), so that one address, whatever its number of
// connections, cannot take every reader of the database: the others
// wait their turn, first come first served. It is safe for concurrent
// use.
type querySlots struct {
	per   int
	mu    sync.Mutex
	peers map[string]*peerSlots
}

// peerSlots are one peer's turns: a token in sem for each running query;
// users counts those running and waiting, so that a peer with none is
// removed.
type peerSlots struct {
	sem     chan struct{}
	users   int
	waiters int
}

func newQuerySlots(per int) *querySlots {
	return &querySlots{per: per, peers: make(map[string]*peerSlots)}
}

// acquire takes a turn of peer, waiting for one at most wait, and
// returns the function that gives it back (once; later calls do
// nothing). It returns errBusy when no turn came in time, ctx's error
// when ctx ended first.
func (q *querySlots) acquire(ctx context.Context, peer string, wait time.Duration) (func(), error) {
	q.mu.Lock()
	p := q.peers[peer]
	if p == nil {
		p = &peerSlots{sem: make(chan struct{}, q.per)}
		q.peers[peer] = p
	}
	p.users++
	q.mu.Unlock()
	var release sync.Once
	got := func() {
		release.Do(func() {
			<-p.sem
			q.leave(peer, p, false)
		})
	}
	select {
	case p.sem <- struct{}{}:
		return got, nil
	default:
	}
	if wait <= 0 {
		q.leave(peer, p, false)
		return nil, errBusy
	}
	q.mu.Lock()
	p.waiters++
	q.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case p.sem <- struct{}{}:
		q.mu.Lock()
		p.waiters--
		q.mu.Unlock()
		return got, nil
	case <-t.C:
		q.leave(peer, p, true)
		return nil, errBusy
	case <-ctx.Done():
		q.leave(peer, p, true)
		return nil, ctx.Err()
	}
}

// leave ends a use of p, a waiter's if waited; a peer with none left is
// removed.
func (q *querySlots) leave(peer string, p *peerSlots, waited bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if waited {
		p.waiters--
	}
	if p.users--; p.users == 0 {
		delete(q.peers, peer)
	}
}

// waiting is how many of peer's REQs wait for a turn.
func (q *querySlots) waiting(peer string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p := q.peers[peer]; p != nil {
		return p.waiters
	}
	return 0
}

// len is how many peers run or wait for queries.
func (q *querySlots) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.peers)
}
