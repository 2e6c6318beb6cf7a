package peercap_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/peercap"
)

// TestListener: over its peer's cap or the total, a connection closes the
// longest-idle one in that scope, or is refused when none is idle; an
// exempt peer counts in the total only; a close gives the place back.
func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusals := make(chan int, 8)
	l := peercap.NewListener(ln, peercap.ListenerConfig{Total: 3, PerPeer: 1,
		Exempt: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") },
		Refuse: func(c net.Conn, key netip.Addr, status int) {
			peercap.WriteRefusal(c, status, http.Header{"Retry-After": {"1"}}, []byte(key.String()))
			refusals <- status
		}})
	accepted := make(chan net.Conn, 8)
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for c := range accepted {
			c.Close()
		}
	})
	dial := func(src string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// busy accepts the connection dialed from src, and marks it busy.
	busy := func(src string) net.Conn {
		t.Helper()
		dial(src)
		c := <-accepted
		t.Cleanup(func() { c.Close() })
		l.ConnState(c, http.StateActive)
		return c
	}
	refused := func(want int) {
		t.Helper()
		if got := <-refusals; got != want {
			t.Fatalf("refused with %d, want %d", got, want)
		}
	}

	a := busy("127.0.0.2")
	over := dial("127.0.0.2") // at its cap, none idle
	refused(http.StatusTooManyRequests)
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the refused connection read %v %v", resp, err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "127.0.0.2" {
		t.Errorf("refusal body %q", body)
	}

	// 127.0.0.1 is exempt from the per-peer cap.
	bClient := dial("127.0.0.1")
	b := <-accepted
	l.ConnState(b, http.StateActive)
	busy("127.0.0.1")
	if n := l.Count(); n != 3 {
		t.Fatalf("Count %d, want 3", n)
	}
	dial("127.0.0.3") // over the total, none idle
	refused(http.StatusServiceUnavailable)
	a.Close() // gives its place back
	busy("127.0.0.4")

	// Over the total, the idle connection makes room.
	l.ConnState(b, http.StateIdle)
	busy("127.0.0.5")
	bClient.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bClient.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the idle connection read %v, want EOF: it was not closed to make room", err)
	}
	if n, ev, ref := l.Count(), l.Evicted(), l.Refused(); n != 3 || ev != 1 || ref != 2 {
		t.Errorf("Count %d, Evicted %d, Refused %d; want 3, 1, 2", n, ev, ref)
	}
}
