package embedded

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/nettest"
)

// A plain HTTP request (not a WebSocket upgrade) whose body never comes
// is answered, or its connection closed, within WriteTimeout: net/http
// reads what a handler left unread of a small body before it writes the
// answer, and with no read deadline that read waited for ever. The relay
// caps WebSocket clients, not these connections, so each held a socket
// and a goroutine of the node's process for as long as the peer liked.
func TestUnreadBodyIsTimedOut(t *testing.T) {
	tr := startRelay(t, Config{WriteTimeout: 100 * time.Millisecond})
	host := strings.TrimPrefix(tr.url, "ws://")
	for _, line := range []string{"POST /", "GET /", "OPTIONS /"} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n", line)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s with a body that never comes: neither answered nor closed after 5 s (WriteTimeout 100ms); read %q", line, b)
		}
	}
}

// A client that sends requests without end and never reads the answers
// has its connection closed once an answer waits WriteTimeout for it:
// before, the relay's write waited for ever (its http.Server has no
// write deadline), holding the connection and its goroutine.
func TestNeverReadAnswersAreTimedOut(t *testing.T) {
	tr := startRelay(t, Config{WriteTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(tr.url, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: localhost\r\nAccept: application/nostr+json\r\n\r\n", 64))
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for {
		_, err := c.Write(req)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the relay still holds a connection whose answers are never read, 5 s on (WriteTimeout 100ms): %v", err)
		}
		return // reset: the relay closed it
	}
}

// tcpFrom opens a TCP connection to hostport from the loopback address src
// (any 127.0.0.0/8 address is this machine's), standing for a peer there.
func tcpFrom(t testing.TB, src, hostport string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", hostport)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wsFrom opens a WebSocket to url from the loopback address src; a client
// refused gets nil and the HTTP status.
func wsFrom(t testing.TB, src, url string) (*client, int) {
	t.Helper()
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		if resp == nil {
			t.Fatalf("dial from %s: %v", src, err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}, http.StatusSwitchingProtocols
}

// TestPlainConnectionsAreCapped: every TCP connection counts against the
// relay's caps, not only WebSocket clients. Connections that never
// upgrade (a slow client's headers, the NIP-11 document, a refused
// upgrade) each held a socket and a goroutine, as many as a peer opened:
// now past its cap the peer's longest-idle connection is closed to make
// room, or, none being idle, the new one is answered 429 and closed; the
// total stays within MaxConnections, and a WebSocket client of another
// address still connects.
func TestPlainConnectionsAreCapped(t *testing.T) {
	const perPeer, total = 4, 12
	// No exemption: the test's peers are all on loopback.
	tr := startRelayExempt(t, Config{MaxConnectionsPerIP: perPeer, MaxConnections: total}, nil)
	host := strings.TrimPrefix(tr.url, "ws://")

	// 127.0.0.2 holds its cap of WebSocket clients, none idle: its next
	// connection, upgrade or not, is refused before its request.
	for range perPeer {
		c, code := wsFrom(t, "127.0.0.2", tr.url)
		if c == nil {
			t.Fatalf("a WebSocket client within the cap: refused with %d", code)
		}
		c.req("s", map[string]any{"limit": 0})
	}
	if c, code := wsFrom(t, "127.0.0.2", tr.url); c != nil || code != http.StatusTooManyRequests {
		t.Errorf("a WebSocket client over its address's cap: status %d, want 429", code)
	}
	plain := tcpFrom(t, "127.0.0.2", host)
	plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(plain), nil); err != nil {
		t.Errorf("a plain connection over its address's cap got no answer: %v", err)
	} else {
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || err != nil {
			t.Errorf("a plain connection over its address's cap: %s %q %v, want 429", resp.Status, b, err)
		}
		if _, err := plain.Read(make([]byte, 1)); err == nil {
			t.Error("the refused connection is still open")
		}
	}

	// Two addresses open four times their cap of connections that send
	// nothing: each keeps at most its cap.
	var flood []net.Conn
	for _, src := range []string{"127.0.0.3", "127.0.0.4"} {
		var conns []net.Conn
		for range 4 * perPeer {
			conns = append(conns, tcpFrom(t, src, host))
		}
		if n := nettest.HeldOpen(conns, perPeer); n > perPeer {
			t.Errorf("the relay holds %d idle connections from %s, cap %d", n, src, perPeer)
		}
		flood = append(flood, conns...)
	}
	// The relay is at its total: a WebSocket client of another address
	// takes the place of an idle connection, and is served.
	c, code := wsFrom(t, "127.0.0.5", tr.url)
	if c == nil {
		t.Fatalf("a WebSocket client of another address: refused with %d", code)
	}
	c.req("s", map[string]any{"limit": 0})
	if n := nettest.HeldOpen(flood, total-perPeer-1); n > total-perPeer-1 {
		t.Errorf("the relay holds %d idle connections beside %d WebSocket clients, total %d", n, perPeer+1, total)
	}
}
