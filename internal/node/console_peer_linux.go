package node

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// consolePeerUser is the console's Config.PeerUser: on Linux, the
// node tells a login's connection's local user.
func consolePeerUser() func(*http.Request) (int, error) { return peerUser }

// errNoLocalSocket: no socket of the node's machine (its network
// namespace) is the other end of a connection: its client is elsewhere.
var errNoLocalSocket = errors.New("the connection's other end is no socket of this machine")

// peerUser returns the uid of the local program whose TCP connection r
// came on: the owner of the socket at the connection's other end, as
// /proc/net/tcp and /proc/net/tcp6 list the sockets of the node's network
// namespace. A socket belongs to the user who made it, and nobody else can
// make one theirs. Sockets listed without an inode (a connection in
// TIME_WAIT, or whose program closed it) are listed as root's: they are
// passed over, as no browser waiting for its answer has one.
func peerUser(r *http.Request) (int, error) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return 0, errors.New("the connection's local address is not known")
	}
	self, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return 0, fmt.Errorf("the connection's local address: %w", err)
	}
	remote, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return 0, fmt.Errorf("the connection's remote address: %w", err)
	}
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return 0, fmt.Errorf("the connection's user: %w", err)
		}
		uid, err := socketOwner(f, remote, self)
		f.Close()
		if !errors.Is(err, errNoLocalSocket) {
			return uid, err
		}
	}
	return 0, errNoLocalSocket
}

// socketOwner reads a table of TCP sockets in the format of /proc/net/tcp
// and returns the uid of the one at local with its other end at remote.
func socketOwner(table io.Reader, local, remote netip.AddrPort) (int, error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	sc := bufio.NewScanner(table)
	sc.Scan() // the heading
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when
		// retrnsmt uid timeout inode …
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[9] == "0" {
			continue
		}
		l, err := procAddr(f[1])
		if err != nil || l != local {
			continue
		}
		if r, err := procAddr(f[2]); err != nil || r != remote {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			return 0, fmt.Errorf("the connection's user: uid %q: %w", f[7], err)
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("the connection's user: %w", err)
	}
	return 0, errNoLocalSocket
}

// procAddr parses an address of /proc/net/tcp{,6}: the address's 32-bit
// words, each in hex as the machine holds it, a colon, and the port in
// hex.
func procAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}
