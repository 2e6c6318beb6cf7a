package embedded

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/nettest"
)

// TestMessageMustArriveInTime: a client that begins a message (a first
// fragment of 100 KiB, which the relay keeps while it reads the rest) and
// never ends it, sending pongs meanwhile as a live client answers pings,
// is disconnected once the message has taken longer than a silent client
// may (twice PingInterval), with a close frame that says why. Pongs
// proved the client alive, and moved the read deadline on for ever: a
// connection held the part of a message it had sent for as long as it
// liked, up to MaxMessageLength (512 KiB) for each of MaxConnections.
func TestMessageMustArriveInTime(t *testing.T) {
	const ping = 100 * time.Millisecond
	tr := startRelay(t, Config{PingInterval: ping})
	c := nettest.DialIdle(t, strings.TrimPrefix(tr.url, "ws://"), "/", 1)[0]
	part := []byte(`["EVENT",{"content":"` + strings.Repeat("a", 100<<10))
	if _, err := c.Write(nettest.ClientFrame(false, websocket.TextMessage, [4]byte{1, 2, 3, 4}, part)); err != nil {
		t.Fatal(err)
	}
	type end struct {
		code int
		text string
	}
	gone := make(chan end, 1)
	go func() {
		for {
			op, p, err := nettest.ReadFrame(c)
			if err != nil {
				gone <- end{code: -1, text: err.Error()}
				return
			}
			if op == websocket.CloseMessage {
				e := end{code: websocket.CloseNoStatusReceived}
				if len(p) >= 2 {
					e = end{code: int(binary.BigEndian.Uint16(p)), text: string(p[2:])}
				}
				gone <- e
				return
			}
		}
	}()
	// The client answers pings, and says more: a pong every quarter of
	// the time a silent client is given.
	tick := time.NewTicker(ping / 2)
	defer tick.Stop()
	limit := time.NewTimer(40 * ping) // twenty times what the message may take
	defer limit.Stop()
	for {
		select {
		case e := <-gone:
			if e.code != websocket.ClosePolicyViolation || !strings.Contains(e.text, "too slow") {
				t.Fatalf("connection ended with %d %q, want %d and a reason saying the message was too slow", e.code, e.text, websocket.ClosePolicyViolation)
			}
			return
		case <-tick.C:
			_ = nettest.WriteFrame(c, websocket.PongMessage, nil)
		case <-limit.C:
			t.Fatalf("a message begun %s ago, its client sending pongs, still holds the connection", 40*ping)
		}
	}
}
