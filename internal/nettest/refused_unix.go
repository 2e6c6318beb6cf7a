//go:build unix

package nettest

import (
	"net/netip"
	"syscall"
	"testing"
)

// RefusedAddr returns a loopback address where connections are refused
// for the whole test: a port bound by a socket that never listens, held
// until the test ends. A listener closed at once, the usual trick, frees
// its port for the next server the machine starts, which then answers
// in its place (a test that waits for "connection refused" reads a 404).
// The socket is made without SO_REUSEADDR, so no other socket binds the
// port while it is held.
func RefusedAddr(t testing.TB) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("nettest: socket: %v", err)
	}
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("nettest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("nettest: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("nettest: bound to %T", sa)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
}
