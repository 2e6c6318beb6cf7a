package snaphttp

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters keeps one token bucket per remote address in a map of bounded
// size. An IPv6 peer is keyed by its /64, the block one host usually
// holds, so that it cannot get a fresh bucket per address.
//
// When the map is full, a new peer takes the place of the least recently
// seen of a few sampled entries: an entry idle for burst/rate has a full
// bucket again and is worth no more than a new one, so evicting it loses
// nothing; under a flood from more peers than the map holds, an evicted
// active peer gets a fresh burst, and memory stays bounded.
type limiters struct {
	rate  rate.Limit
	burst int
	max   int
	now   func() time.Time

	mu sync.Mutex
	m  map[netip.Addr]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// evictionSample is how many entries are compared to choose the one to
// evict.
const evictionSample = 8

func newLimiters(r rate.Limit, burst, max int, now func() time.Time) *limiters {
	return &limiters{rate: r, burst: burst, max: max, now: now, m: make(map[netip.Addr]*bucket, min(max, 1024))}
}

// allow takes a token for the peer key. When none is left it reports how
// long until one is.
func (l *limiters) allow(key netip.Addr) (bool, time.Duration) {
	if l.rate == rate.Inf {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.m[key]
	if !ok {
		if len(l.m) >= l.max {
			l.evict()
		}
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.m[key] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Duration(math.MaxInt64)
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// evict removes the least recently seen of a few entries. Go's map
// iteration starts at a random place, which makes the sample random.
func (l *limiters) evict() {
	var (
		victim netip.Addr
		oldest time.Time
		n      int
	)
	for k, b := range l.m {
		if n == 0 || b.last.Before(oldest) {
			victim, oldest = k, b.last
		}
		if n++; n == evictionSample {
			break
		}
	}
	delete(l.m, victim)
}

// size returns the number of buckets held.
func (l *limiters) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// peerKey is the rate-limiting and connection-counting key of a request's
// remote address: the IPv4 address, or the /64 of an IPv6 one. An address
// that does not parse (a test's fake RemoteAddr) shares the zero key.
func peerKey(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// retryAfter is d in whole seconds, rounded up, at least 1, as the
// Retry-After header and retryAfter data give it.
func retryAfter(d time.Duration) int64 {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 || d < 0 {
		return 1
	}
	return s
}

// connCounter caps WebSocket connections, per peer and in all.
type connCounter struct {
	perPeer, total int

	mu  sync.Mutex
	n   int
	per map[netip.Addr]int
}

func newConnCounter(perPeer, total int) *connCounter {
	return &connCounter{perPeer: perPeer, total: total, per: make(map[netip.Addr]int)}
}

// acquire counts one connection of key; it returns the HTTP status to
// refuse with (429 over the peer's cap, 503 over the total), or 0.
func (c *connCounter) acquire(key netip.Addr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.n >= c.total:
		return http.StatusServiceUnavailable
	case c.per[key] >= c.perPeer:
		return http.StatusTooManyRequests
	}
	c.n++
	c.per[key]++
	return 0
}

// release uncounts one connection of key.
func (c *connCounter) release(key netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.per[key]--; c.per[key] <= 0 {
		delete(c.per, key)
	}
}

// count returns the connections counted.
func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
