package embedded

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
