package snaphttp

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// peerKey is the rate-limiting and connection-counting key of a request's
// remote address: the IPv4 address, or the /64 of an IPv6 one. An address
// that does not parse (a test's fake RemoteAddr) shares the zero key.
func peerKey(r *http.Request) netip.Addr { return keyOf(r.RemoteAddr) }

// keyOf is peerKey of a remote address, host:port or a bare host.
func keyOf(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
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
