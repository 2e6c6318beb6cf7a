package ratelimit

import (
	"container/list"
	"math"
	"strconv"
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
	mu    sync.Mutex
	cfg   Config                   // Rate and Burst change with SetRate
	byKey map[string]*list.Element // of *bucket
	order *list.List               // most recently used first
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// New returns a Limiter for cfg.
func New(cfg Config) *Limiter {
	cfg.Burst = burstOf(cfg.Rate, cfg.Burst)
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{cfg: cfg, byKey: make(map[string]*list.Element), order: list.New()}
}

// burstOf is burst, or one second's worth of rate (at least 1) when
// burst is not positive.
func burstOf(rate float64, burst int) int {
	if burst <= 0 {
		return max(1, int(math.Ceil(rate)))
	}
	return burst
}

// Enabled reports whether the Limiter limits at all.
func (l *Limiter) Enabled() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Rate > 0
}

// Rate is the tokens a second each bucket gains now (0: no limit).
func (l *Limiter) Rate() float64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.cfg.Rate, 0)
}

// SetRate changes the rate and burst of every bucket, those already kept
// included: a key keeps the tokens it has (up to the new burst) and refills
// at the new rate. A rate of zero or less disables limiting.
func (l *Limiter) SetRate(r float64, burst int) {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.Rate, l.cfg.Burst = r, burstOf(r, burst)
	for e := l.order.Front(); e != nil; e = e.Next() {
		b := e.Value.(*bucket)
		b.lim.SetLimitAt(now, rate.Limit(r))
		b.lim.SetBurstAt(now, l.cfg.Burst)
	}
}

// Allow takes a token from key's bucket. When there is none it takes
// nothing and reports how long until there will be one.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Rate <= 0 {
		return true, 0
	}
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

// Window states the sustained rate as SNAP's 5002 data does: at most
// limit requests in window, a whole number of seconds written as the
// error catalogue writes it ("1s", "2s", "1m", "1h"), the shortest that
// lets one request through (a burst may take more at once). A Limiter
// that limits nothing gives 0 and "".
func (l *Limiter) Window() (limit int, window string) {
	r := l.Rate()
	if r <= 0 {
		return 0, ""
	}
	secs := 1
	if r < 1 {
		secs = int(min(math.Ceil(1/r-1e-9), 1<<30))
	}
	limit = max(1, int(math.Floor(r*float64(secs)+1e-9)))
	switch {
	case secs%3600 == 0:
		window = strconv.Itoa(secs/3600) + "h"
	case secs%60 == 0:
		window = strconv.Itoa(secs/60) + "m"
	default:
		window = strconv.Itoa(secs) + "s"
	}
	return limit, window
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1: the form of
// SNAP's retryAfter and HTTP's Retry-After.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
