package peercap

import (
	"bytes"
	"container/list"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ListenerConfig is the caps of a Listener.
type ListenerConfig struct {
	// Total caps the connections held in all; PerPeer those of one peer
	// (Key of the remote address).
	Total, PerPeer int
	// Exempt, when not nil, says which peers count in Total only.
	Exempt func(netip.Addr) bool
	// Refuse answers a connection over a cap, refused with status (429
	// over its peer's cap, 503 over the total) and its peer's key, before
	// the Listener closes it; nil closes it without a word. It runs in
	// the accept loop: it must not wait (see WriteRefusal).
	Refuse func(c net.Conn, key netip.Addr, status int)
}

// Listener caps the TCP connections accepted from a listener, in all and
// per peer, so that the process never runs out of file descriptors and
// no peer holds more than its share. It counts every connection, from its
// accept to its close, whatever is done with it.
//
// A connection is idle while no request is in progress on it, as the
// http.Server whose ConnState hook is the Listener's ConnState reports:
// before its first request (its headers are still being read) and between
// keep-alive requests. When a new connection would go over a cap, the
// connection idle the longest in that cap's scope (the peer's own
// connections when the peer is at its cap, anyone's when the total is) is
// closed to make room: idle connections cannot shut out a request. When
// none is idle, the new connection is refused (see ListenerConfig.Refuse)
// and closed. A hijacked connection (a WebSocket) is never idle: it stays
// counted until it closes.
type Listener struct {
	net.Listener
	cfg ListenerConfig

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

// NewListener returns ln capped as cfg says. Set its ConnState as the
// http.Server's ConnState hook, else every connection stays idle.
func NewListener(ln net.Listener, cfg ListenerConfig) *Listener {
	return &Listener{Listener: ln, cfg: cfg, idle: list.New(), peers: make(map[netip.Addr]*peerConns)}
}

// limitedConn is a counted connection. Its fields other than the embedded
// Conn are guarded by the listener's mu.
type limitedConn struct {
	net.Conn
	l        *Listener
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
func (l *Listener) Accept() (net.Conn, error) {
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
		if l.cfg.Refuse != nil {
			l.cfg.Refuse(c, key, status)
		}
		c.Close()
	}
}

// admit counts c, closing an idle connection to make room when needed
// (victim, to be closed by the caller), or returns the status to refuse c
// with.
func (l *Listener) admit(c net.Conn, key netip.Addr) (lc *limitedConn, victim *limitedConn, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[key]
	if p == nil {
		p = &peerConns{idle: list.New()}
		l.peers[key] = p
	}
	capped := l.cfg.Exempt == nil || !l.cfg.Exempt(key)
	switch {
	case capped && p.n >= l.cfg.PerPeer:
		if e := p.idle.Front(); e != nil {
			victim = e.Value.(*limitedConn)
		} else {
			status = http.StatusTooManyRequests
		}
	case l.n >= l.cfg.Total:
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

func (l *Listener) markIdleLocked(c *limitedConn, p *peerConns) {
	if c.released || c.idle != nil {
		return
	}
	c.idle = l.idle.PushBack(c)
	c.peerIdle = p.idle.PushBack(c)
}

func (l *Listener) markBusyLocked(c *limitedConn, p *peerConns) {
	if c.idle == nil {
		return
	}
	l.idle.Remove(c.idle)
	p.idle.Remove(c.peerIdle)
	c.idle, c.peerIdle = nil, nil
}

func (l *Listener) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *Listener) releaseLocked(c *limitedConn) {
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

// ConnState is the http.Server's ConnState hook: it tells the listener
// which connections are idle.
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
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

// Count returns the connections counted.
func (l *Listener) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Evicted returns how many idle connections were closed to make room.
func (l *Listener) Evicted() int64 { return l.evicted.Load() }

// Refused returns how many connections were refused over a cap.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// addrKey is Key of a connection's remote address.
func addrKey(a net.Addr) netip.Addr {
	if a == nil {
		return netip.Addr{}
	}
	return Key(a.String())
}

// refusalTimeout bounds writing a refusal, which happens in the accept
// loop; a fresh connection's send buffer takes it at once.
const refusalTimeout = 50 * time.Millisecond

// WriteRefusal writes an HTTP/1.1 answer of status, with the header h
// (Connection and Content-Length are set) and body, to a connection about
// to be closed, in one write that waits at most 50 ms: a Refuse function
// of ListenerConfig writes with it.
func WriteRefusal(c net.Conn, status int, h http.Header, body []byte) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(&b)
	fmt.Fprintf(&b, "Connection: close\r\nContent-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	_ = c.SetWriteDeadline(time.Now().Add(refusalTimeout))
	_, _ = c.Write(b.Bytes())
}
