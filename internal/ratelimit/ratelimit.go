package ratelimit

import (
	"container/list"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Config configures a Limiter.
type Config struct {
	// Rate is the tokens added per second to each key's bucket; zero or
	// less disables limiting (Allow always allows).
	Rate float64
	// Burst is each bucket's size (default: one second's worth, at least 1).
	Burst int
	// MaxKeys bounds the buckets kept (default 100,000).
	MaxKeys int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Limiter is a set of token buckets, one per key. It is safe for
// concurrent use.
type Limiter struct {
	cfg   Config
	mu    sync.Mutex
	byKey map[string]*list.Element // of *bucket
	order *list.List               // most recently used first
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// New returns a Limiter for cfg.
func New(cfg Config) *Limiter {
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(math.Ceil(cfg.Rate)))
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, byKey: make(map[string]*list.Element), order: list.New()}
}

// Enabled reports whether the Limiter limits at all.
func (l *Limiter) Enabled() bool { return l != nil && l.cfg.Rate > 0 }

// Allow takes a token from key's bucket. When there is none it takes
// nothing and reports how long until there will be one.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if !l.Enabled() {
		return true, 0
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if e, found := l.byKey[key]; found {
		l.order.MoveToFront(e)
		b = e.Value.(*bucket)
	} else {
		if l.order.Len() >= l.cfg.MaxKeys {
			old := l.order.Back()
			l.order.Remove(old)
			delete(l.byKey, old.Value.(*bucket).key)
		}
		b = &bucket{key: key, lim: rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)}
		l.byKey[key] = l.order.PushFront(b)
	}
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Len is the number of buckets kept.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1: the form of
// SNAP's retryAfter and HTTP's Retry-After.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
