package nettest

import (
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// HeldOpen waits until at most max of conns are still open on the server's
// side, for up to 5 seconds (a server accepts connections in the
// background, in no order the dialer can know), and returns how many are.
// A connection the server closed reads EOF (or a reset) at once; one it
// holds reads nothing until a short deadline. The connections are read
// at once, each in a goroutine: read one after another, those after the
// first held one found the deadline passed before they were read, and
// counted as held whatever the server had done.
func HeldOpen(conns []net.Conn, max int) int {
	open := conns
	for end := time.Now().Add(5 * time.Second); ; {
		deadline := time.Now().Add(100 * time.Millisecond)
		var (
			mu    sync.Mutex
			still []net.Conn
			wg    sync.WaitGroup
		)
		for _, c := range open {
			wg.Go(func() {
				c.SetReadDeadline(deadline)
				if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
					mu.Lock()
					still = append(still, c)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		open = still
		if len(open) <= max || time.Now().After(end) {
			return len(open)
		}
	}
}

// MachineIPv4 is an IPv4 address of this machine other than loopback, from
// which a test can be a client off loopback; on a machine without one, it
// skips tb.
func MachineIPv4(tb testing.TB) string {
	tb.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		tb.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	tb.Skip("this machine has no IPv4 address but loopback: no client off loopback can be made here")
	return ""
}
