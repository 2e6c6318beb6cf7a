package sqldb_test

import (
	"context"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"

	"github.com/snapnode/snapnode/internal/testdb"
)

// A connection to PostgreSQL fails once what it sent goes unacknowledged
// for half a minute (TCP_USER_TIMEOUT), and probes an idle server
// (keepalive): a server whose machine or network went away is found
// then, not after Linux's 15 minutes of retransmissions.
func TestPostgresConnectionFindsAServerGone(t *testing.T) {
	db := testdb.Open(t, testdb.Postgres(t))
	conn, err := db.W.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var userTimeout, keepAlive int
	if err := conn.Raw(func(c any) error {
		tcp, ok := c.(*stdlib.Conn).Conn().PgConn().Conn().(*net.TCPConn)
		if !ok {
			t.Skip("the test server is not reached over TCP")
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = raw.Control(func(fd uintptr) {
			if userTimeout, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); serr == nil {
				keepAlive, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}); err != nil {
		t.Fatal(err)
	}
	if userTimeout <= 0 || userTimeout > 60_000 {
		t.Errorf("TCP_USER_TIMEOUT = %d ms, want (0, 60 s]", userTimeout)
	}
	if keepAlive == 0 {
		t.Error("SO_KEEPALIVE is off")
	}
}
