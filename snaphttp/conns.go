package snaphttp

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/snap"
)

// DefaultTCPConns returns the default caps on the TCP connections a
// Server holds, for a process allowed nofile open files (0: unknown, taken
// as 1,024): half of it in all, between 64 and 16,384, so that the
// databases, the workspace, the relay and the logs keep the other half;
// and a sixteenth of that per peer, at least 8. An explicit total without
// a per-peer cap gets a sixteenth of it per peer too.
func DefaultTCPConns(nofile uint64) (total, perPeer int) {
	if nofile == 0 {
		nofile = 1024
	}
	total = int(min(max(nofile/2, 64), 16384))
	return total, perPeerConns(total)
}

// perPeerConns is the default per-peer cap for a total of total: a
// sixteenth, at least 8 (and at most total).
func perPeerConns(total int) int { return min(max(total/16, 8), total) }

// connLimiter caps the TCP connections accepted from a listener, in all
// and per peer (peerKey of the remote address), so that the process never
// runs out of file descriptors and no peer holds more than its share.
//
// A connection is idle while no request is in progress on it: before its
// first request (its headers are still being read) and between keep-alive
// requests. When a new connection would go over a cap, the connection idle
// the longest in that cap's scope (the peer's own connections when the
// peer is at its cap, anyone's when the total is) is closed to make room:
// idle connections cannot shut out a request. When none is idle, the new
// connection is answered at once, 429 (its peer is at its cap) or 503 (the
// total), with Retry-After, and closed. A WebSocket connection is never
// idle in this sense: it stays counted until it closes.
type connLimiter struct {
	net.Listener
	total, perPeer int

	mu    sync.Mutex
	n     int
	idle  *list.List // of *limitedConn, longest idle first
	peers map[netip.Addr]*peerConns

	evicted, refused atomic.Int64
}

type peerConns struct {
	n    int
	idle *list.List // of *limitedConn
}

func newConnLimiter(ln net.Listener, total, perPeer int) *connLimiter {
	return &connLimiter{Listener: ln, total: total, perPeer: perPeer, idle: list.New(), peers: make(map[netip.Addr]*peerConns)}
}

// limitedConn is a counted connection. Its fields other than the embedded
// Conn are guarded by the limiter's mu.
type limitedConn struct {
	net.Conn
	l        *connLimiter
	key      netip.Addr
	idle     *list.Element // in l.idle; nil when busy
	peerIdle *list.Element // in the peer's idle list
	released bool
}

// Close closes the connection and uncounts it.
func (c *limitedConn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// Accept returns the next connection within the caps, refusing or making
// room as the type's doc says. Errors are the inner listener's.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(c.RemoteAddr())
		lc, victim, status := l.admit(c, key)
		if victim != nil {
			l.evicted.Add(1)
			victim.Conn.Close()
		}
		if lc != nil {
			return lc, nil
		}
		l.refused.Add(1)
		refuseConn(c, status)
	}
}

// admit counts c, closing an idle connection to make room when needed
// (victim, to be closed by the caller), or returns the status to refuse c
// with.
func (l *connLimiter) admit(c net.Conn, key netip.Addr) (lc *limitedConn, victim *limitedConn, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[key]
	if p == nil {
		p = &peerConns{idle: list.New()}
		l.peers[key] = p
	}
	switch {
	case p.n >= l.perPeer:
		if e := p.idle.Front(); e != nil {
			victim = e.Value.(*limitedConn)
		} else {
			status = http.StatusTooManyRequests
		}
	case l.n >= l.total:
		if e := l.idle.Front(); e != nil {
			victim = e.Value.(*limitedConn)
		} else {
			status = http.StatusServiceUnavailable
		}
	}
	if victim != nil {
		l.releaseLocked(victim)
	}
	if status != 0 {
		if p.n == 0 {
			delete(l.peers, key)
		}
		return nil, victim, status
	}
	lc = &limitedConn{Conn: c, l: l, key: key}
	l.n++
	p.n++
	l.markIdleLocked(lc, p)
	return lc, victim, 0
}

func (l *connLimiter) markIdleLocked(c *limitedConn, p *peerConns) {
	if c.released || c.idle != nil {
		return
	}
	c.idle = l.idle.PushBack(c)
	c.peerIdle = p.idle.PushBack(c)
}

func (l *connLimiter) markBusyLocked(c *limitedConn, p *peerConns) {
	if c.idle == nil {
		return
	}
	l.idle.Remove(c.idle)
	p.idle.Remove(c.peerIdle)
	c.idle, c.peerIdle = nil, nil
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *connLimiter) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	p := l.peers[c.key]
	l.markBusyLocked(c, p)
	c.released = true
	l.n--
	if p.n--; p.n <= 0 {
		delete(l.peers, c.key)
	}
}

// connState is the http.Server's ConnState hook: it tells the limiter
// which connections are idle.
func (l *connLimiter) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	p := l.peers[c.key]
	switch st {
	case http.StateNew, http.StateIdle:
		l.markIdleLocked(c, p)
	case http.StateActive, http.StateHijacked:
		l.markBusyLocked(c, p)
	case http.StateClosed:
		l.releaseLocked(c)
	}
}

// count returns the connections counted.
func (l *connLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// refuseTimeout bounds writing the refusal of a connection, which happens
// in the accept loop; a fresh connection's send buffer takes it at once.
const refuseTimeout = 50 * time.Millisecond

// refuseConn answers c with status, as writeError would, and closes it.
func refuseConn(c net.Conn, status int) {
	msg, code := "too many connections; retry later", snap.CodeServiceUnavailable
	if status == http.StatusTooManyRequests {
		msg, code = "too many connections from this address; retry later", snap.CodeRateLimitExceeded
	}
	body := errorBody(status, code, msg, map[string]any{"retryAfter": 1})
	_ = c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nRetry-After: 1\r\nSNAP-Version: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), snap.ProtocolVersion, len(body), body)
	c.Close()
}

// addrKey is peerKey of a connection's remote address.
func addrKey(a net.Addr) netip.Addr {
	if a == nil {
		return netip.Addr{}
	}
	return peercap.Key(a.String())
}
