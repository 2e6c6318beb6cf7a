package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
)

// loopPasses counts the ends of the passes of the node's periodic loops
// on the database (periodic.Pass), by loop: every Pass on a context made
// from the node's tells it (see Start). Safe for concurrent use.
type loopPasses struct {
	mu     sync.Mutex
	counts map[string]*LoopCount
}

// LoopCount is how the passes of one loop ended.
type LoopCount struct {
	OK, Failed, Abandoned int64
}

// maxLoops bounds the loops counted: their names are the code's own, a
// handful.
const maxLoops = 64

func (l *loopPasses) observe(loop string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts[loop]
	if c == nil {
		if len(l.counts) >= maxLoops {
			return
		}
		if l.counts == nil {
			l.counts = make(map[string]*LoopCount)
		}
		c = new(LoopCount)
		l.counts[loop] = c
	}
	switch {
	case err == nil:
		c.OK++
	case errors.Is(err, periodic.ErrAbandoned):
		c.Abandoned++
	default:
		c.Failed++
	}
}

// snapshot returns the counts so far.
func (l *loopPasses) snapshot() map[string]LoopCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]LoopCount, len(l.counts))
	for k, c := range l.counts {
		out[k] = *c
	}
	return out
}

// loopInterval is d, the interval of one of the node's periodic loops,
// or the one the tests set for all (WithLoopInterval).
func (o options) loopInterval(d time.Duration) time.Duration {
	if o.loopEvery > 0 {
		return o.loopEvery
	}
	return d
}

// withLoops gives ctx, which every part of the node is started on, the
// observer of the loops' passes.
func (n *Node) withLoops(ctx context.Context) context.Context {
	return periodic.WithObserver(ctx, n.loops.observe)
}

// loopTiming is one periodic loop's interval and the bound of each of
// its passes (background_timeout).
type loopTiming struct {
	interval, bound time.Duration
}
