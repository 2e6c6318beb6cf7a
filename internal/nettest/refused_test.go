//go:build unix

package nettest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/nettest"
)

// The address refuses connections, and no listener takes its port while
// the test holds it.
func TestRefusedAddr(t *testing.T) {
	addr := nettest.RefusedAddr(t)
	if _, err := net.Dial("tcp", addr.String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr.String()); err == nil {
		ln.Close()
		t.Errorf("a listener took %s while it was held", addr)
	}
}
