package testdb

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// ProxyMode is what a Proxy does with the bytes between the database's
// clients and its server.
type ProxyMode int

const (
	// Forward carries the bytes both ways.
	Forward ProxyMode = iota
	// Cut closes the connections carried and holds every new one open
	// without a byte either way, as an address does whose server is gone
	// (a failover not yet done, a balancer whose backend died).
	Cut
	// Hang keeps the connections open and takes what the clients send,
	// passing it on to the server, but passes none of the server's
	// replies on, existing connections' and new ones' alike: a server
	// that hung (locks never released, a stuck disk) or a proxy that
	// holds connections. TCP acknowledges every byte: neither keepalive
	// nor TCP_USER_TIMEOUT finds it.
	Hang
)

// Proxy forwards TCP connections to a database server, in the mode
// SetMode sets (Forward at first).
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  ProxyMode
	held  chan struct{} // closed when the mode leaves Hang
	conns map[net.Conn]struct{}
}

// NewProxy returns a Proxy listening on a loopback port for target
// (host:port), closed when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{}), held: make(chan struct{})}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		if p.mode == Hang {
			close(p.held)
			p.mode = Forward
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			cut := p.mode == Cut
			p.mu.Unlock()
			if cut {
				continue // closed at cleanup
			}
			wg.Go(func() { p.forward(c) })
		}
	})
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// ProxiedDSN returns dsn (a postgres:// URL) with its host replaced by
// a Proxy's, and the Proxy.
func ProxiedDSN(tb testing.TB, dsn string) (string, *Proxy) {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	p := NewProxy(tb, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

func (p *Proxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		u.Close()
		close(done)
	}()
	_, _ = io.Copy(&replies{p: p, c: c}, u)
	c.Close()
	<-done
}

// replies writes the server's replies to the client c, holding each
// while the mode is Hang.
type replies struct {
	p *Proxy
	c net.Conn
}

func (r *replies) Write(b []byte) (int, error) {
	r.p.mu.Lock()
	held := r.p.held
	hang := r.p.mode == Hang
	r.p.mu.Unlock()
	if hang {
		<-held
	}
	return r.c.Write(b)
}

// SetMode makes the proxy Forward, Cut or Hang from now on.
func (p *Proxy) SetMode(m ProxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Hang && m != Hang {
		close(p.held)
		p.held = make(chan struct{})
	}
	p.mode = m
	if m == Cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
