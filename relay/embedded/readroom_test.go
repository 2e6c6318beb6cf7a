package embedded

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/peercap"
)

// TestReadingBytesBounded: what the messages being read hold is bounded
// by peer (MaxReadingBytesPerIP) and for every peer together
// (MaxReadingBytes). Four connections of one address each begin a message
// of 60 KiB and do not end it (kept as it comes: 60 KiB each); a whole
// message of that size from the same address is then refused with OK
// false "rate-limited:", and, with the relay-wide bound at its least, so
// is one from another address; from loopback, and once the four are gone,
// it is taken. Before, nothing bounded them but MaxConnections:
// MaxMessageLength for each of them, 2 GiB by default.
func TestReadingBytesBounded(t *testing.T) {
	const limit = 64 << 10
	for _, c := range []struct {
		name       string
		total      int64
		other      string // the address of the whole message
		want       string // its OK's message, "" if taken
		wantPrefix string
	}{
		{name: "same address", other: "203.0.113.7", wantPrefix: "rate-limited: the messages your address is sending"},
		{name: "other address", other: "198.51.100.1"},
		{name: "other address, relay-wide bound", total: 1, other: "198.51.100.1", wantPrefix: "rate-limited: the messages being sent to this relay"},
		{name: "loopback", total: 1, other: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := startRelay(t, Config{MaxMessageLength: limit, MaxReadingBytes: c.total})
			if got := tr.cfg.MaxReadingBytesPerIP; got != 4*limit {
				t.Fatalf("MaxReadingBytesPerIP %d, want four messages' worth, %d", got, 4*limit)
			}
			url := frontRelay(t, tr.Relay)
			const from = "203.0.113.7"
			peer := peerName(peercap.Key(net.JoinHostPort(from, "1")))
			var stalled []*client
			for range 4 {
				s := mustDialFrom(t, url, from)
				w, err := s.ws.NextWriter(websocket.TextMessage)
				if err != nil {
					t.Fatal(err)
				}
				// Frames go out as the writer's buffer fills; the last
				// one, and the end of the message, never do.
				if _, err := w.Write([]byte(`["EVENT",{"content":"` + strings.Repeat("a", 60<<10))); err != nil {
					t.Fatal(err)
				}
				stalled = append(stalled, s)
			}
			// Each keeps 64 KiB, its lent 4 KiB aside.
			held := int64(4 * (64<<10 - readBufferSize))
			waitUntil(t, func() bool { return tr.reading.count(peer) == held },
				func() string { return "counted " + strconv.FormatInt(tr.reading.count(peer), 10) })

			k := newKey(t)
			ev := k.event(t, 1, tr.clock.Unix(), strings.Repeat("b", 60<<10))
			pub := mustDialFrom(t, url, c.other)
			ok, msg := pub.publish(ev)
			switch {
			case c.wantPrefix == "" && !ok:
				t.Fatalf("refused: %q", msg)
			case c.wantPrefix != "" && (ok || !strings.HasPrefix(msg, c.wantPrefix)):
				t.Fatalf("OK %v %q, want false %q…", ok, msg, c.wantPrefix)
			}
			if c.wantPrefix == "" {
				return
			}
			for _, s := range stalled {
				s.ws.Close()
			}
			waitUntil(t, func() bool { return tr.reading.count(peer) == 0 },
				func() string { return "counted " + strconv.FormatInt(tr.reading.count(peer), 10) })
			if ok, msg := pub.publish(ev); !ok {
				t.Fatalf("once the stalled messages are gone: refused: %q", msg)
			}
		})
	}
}
