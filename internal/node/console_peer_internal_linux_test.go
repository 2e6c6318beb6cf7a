package node

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// A table as /proc/net/tcp and tcp6 print it on a little-endian machine:
// a listener of the node (uid 0) on 127.0.0.1:7448, the node's end of
// three connections to it, and their client ends: uid 1000's from port
// 40000, one in TIME_WAIT from port 40001 (listed as root's, inode 0),
// and uid 1001's over IPv6 as a v4-mapped address from port 40002.
const (
	tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1D18 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1067 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1D18 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C40 0100007F:1D18 01 00000000:00000000 00:00000000 00000000  1000        0 2002 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9C41 0100007F:1D18 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
`
	tcp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:9C42 0000000000000000FFFF00000100007F:1D18 01 00000000:00000000 00:00000000 00000000  1001        0 3003 1 0000000000000000 20 4 30 10 -1
   1: 00000000000000000000000001000000:9C43 00000000000000000000000001000000:1D18 01 00000000:00000000 00:00000000 00000000  1002        0 3004 1 0000000000000000 20 4 30 10 -1
`
)

// TestSocketOwner: the uid of a connection's client end is read from its
// line; a line without an inode (TIME_WAIT, listed as root's) is passed
// over; a connection of no socket listed is errNoLocalSocket.
func TestSocketOwner(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the tables are those of a little-endian machine")
	}
	node := netip.MustParseAddrPort("127.0.0.1:7448")
	for _, c := range []struct {
		table, client string
		uid           int
		err           error
	}{
		{tcpTable, "127.0.0.1:40000", 1000, nil},
		{tcpTable, "[::ffff:127.0.0.1]:40000", 1000, nil},
		{tcpTable, "127.0.0.1:40001", 0, errNoLocalSocket},
		{tcpTable, "127.0.0.1:40009", 0, errNoLocalSocket},
		{tcp6Table, "127.0.0.1:40002", 1001, nil},
		{tcpTable, "192.0.2.7:40000", 0, errNoLocalSocket},
	} {
		uid, err := socketOwner(strings.NewReader(c.table), netip.MustParseAddrPort(c.client), node)
		if uid != c.uid || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("client %s: uid %d, %v; want %d, %v", c.client, uid, err, c.uid, c.err)
		}
	}
	uid, err := socketOwner(strings.NewReader(tcp6Table), netip.MustParseAddrPort("[::1]:40003"), netip.MustParseAddrPort("[::1]:7448"))
	if uid != 1002 || err != nil {
		t.Errorf("client [::1]:40003: uid %d, %v; want 1002", uid, err)
	}
}
