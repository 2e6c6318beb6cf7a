package embedded

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// stallListener's connections never take the bytes of a 101 (the
// upgrade's answer), as a peer that reads nothing and let the socket's
// buffers fill: the write waits until its deadline, or for ever.
type stallListener struct{ net.Listener }

func (l stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, closed: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	mu       sync.Mutex
	deadline time.Time
	once     sync.Once
	closed   chan struct{}
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *stallConn) Write(p []byte) (int, error) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 101 ")) {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	var expired <-chan time.Time
	if !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-expired:
		return 0, os.ErrDeadlineExceeded
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

// The upgrade's answer is written within WriteTimeout: the WebSocket
// library clears the deadline ServeHTTP set, so that with no handshake
// time-out of its own a peer that reads nothing held the connection, its
// place among MaxConnections and a goroutine for ever.
func TestUpgradeAnswerHasAWriteDeadline(t *testing.T) {
	r := startRelay(t, Config{WriteTimeout: 200 * time.Millisecond})
	srv := httptest.NewUnstartedServer(r.Relay)
	srv.Listener = stallListener{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Listener.Addr().String()+"/", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "13")
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("read %d bytes, %v; want the connection closed once the answer's write timed out", n, err)
	}
}
