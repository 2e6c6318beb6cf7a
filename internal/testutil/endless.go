package testutil

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Sent is what EndlessUpgrade wrote: its bytes, and the error that
// stopped it (nil when it wrote all it had: the client read everything).
type Sent struct {
	Bytes int
	Err   error
}

// EndlessUpgradeBytes is how much of a header block EndlessUpgrade sends
// at most.
const EndlessUpgradeBytes = 48 << 20

// EndlessUpgrade plays a hostile WebSocket server (an agent, a relay): it
// answers the first upgrade sent to the address it listens on with a 101
// whose headers go on for EndlessUpgradeBytes. It returns the server's
// ws:// URL and a channel that gets what it sent once it stops.
func EndlessUpgrade(t testing.TB) (url string, sent <-chan Sent) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan Sent, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			out <- Sent{Err: err}
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			out <- Sent{Err: err}
			return
		}
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		n, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
		line := []byte("X-Pad: " + strings.Repeat("a", 1000) + "\r\n")
		for err == nil && n < EndlessUpgradeBytes {
			var m int
			m, err = c.Write(line)
			n += m
		}
		out <- Sent{Bytes: n, Err: err}
		if err == nil {
			io.Copy(io.Discard, c) // until the client closes
		}
	}()
	return "ws://" + ln.Addr().String(), out
}
