package nettest

import (
	"errors"
	"net"
	"os"
	"time"
)

// HeldOpen waits until at most max of conns are still open on the server's
// side, for up to 5 seconds (a server accepts connections in the
// background, in no order the dialer can know), and returns how many are.
// A connection the server closed reads EOF (or a reset) at once; one it
// holds reads nothing until a short deadline.
func HeldOpen(conns []net.Conn, max int) int {
	open := conns
	for end := time.Now().Add(5 * time.Second); ; {
		deadline := time.Now().Add(100 * time.Millisecond)
		var still []net.Conn
		for _, c := range open {
			c.SetReadDeadline(deadline)
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
				still = append(still, c)
			}
		}
		open = still
		if len(open) <= max || time.Now().After(end) {
			return len(open)
		}
	}
}
