package peercap

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Key is the peer a remote address (host:port, or a bare host) belongs
// to: the IPv4 address, or the /64 of an IPv6 one (::1 as itself, so that
// the key of a loopback address is one), without its zone. An
// address that does not parse gives the zero Addr, which all such
// addresses share.
func Key(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	// ::1 is kept whole: its /64, ::, is not a loopback address, and
	// callers exempt loopback peers by testing the key.
	if a.Is6() && !a.IsLoopback() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Counter caps connections in all and per peer. It is safe for
// concurrent use. The zero value is not usable: make one with New.
type Counter struct {
	perPeer, total int
	exempt         func(netip.Addr) bool

	mu  sync.Mutex
	n   int
	per map[netip.Addr]int // the peers connected now, no others
}

// New caps connections at total in all and perPeer from one peer; a peer
// for which exempt (when not nil) is true counts in the total only.
func New(perPeer, total int, exempt func(netip.Addr) bool) *Counter {
	return &Counter{perPeer: perPeer, total: total, exempt: exempt, per: make(map[netip.Addr]int)}
}

// Acquire counts one connection of key and returns 0, or counts nothing
// and returns the HTTP status to refuse it with: 503 over the total, 429
// over the peer's cap.
func (c *Counter) Acquire(key netip.Addr) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	counted := c.exempt == nil || !c.exempt(key)
	switch {
	case c.n >= c.total:
		return http.StatusServiceUnavailable
	case counted && c.per[key] >= c.perPeer:
		return http.StatusTooManyRequests
	}
	c.n++
	if counted {
		c.per[key]++
	}
	return 0
}

// Release uncounts one connection of key that Acquire counted.
func (c *Counter) Release(key netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if n, ok := c.per[key]; ok {
		if n <= 1 {
			delete(c.per, key)
		} else {
			c.per[key] = n - 1
		}
	}
}

// Count returns the connections counted.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Peers returns how many peers have a connection counted under their
// cap.
func (c *Counter) Peers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.per)
}
