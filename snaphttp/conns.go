package snaphttp

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/snap"
)

// DefaultTCPConns returns the default caps on the TCP connections a
// Server holds, for a process allowed nofile open files (0: unknown, taken
// as 1,024): half of it in all, between 64 and 16,384, so that the
// databases, the workspace, the relay and the logs keep the other half;
// and a sixteenth of that per peer, at least 8. An explicit total without
// a per-peer cap gets a sixteenth of it per peer too.
func DefaultTCPConns(nofile uint64) (total, perPeer int) {
	if nofile == 0 {
		nofile = 1024
	}
	total = int(min(max(nofile/2, 64), 16384))
	return total, perPeerConns(total)
}

// perPeerConns is the default per-peer cap for a total of total: a
// sixteenth, at least 8 (and at most total).
func perPeerConns(total int) int { return min(max(total/16, 8), total) }

// refuseConn answers a connection over a cap of peercap.Listener with
// status, as writeError would.
func refuseConn(c net.Conn, _ netip.Addr, status int) {
	msg, code := "too many connections; retry later", snap.CodeServiceUnavailable
	if status == http.StatusTooManyRequests {
		msg, code = "too many connections from this address; retry later", snap.CodeRateLimitExceeded
	}
	h := make(http.Header, 4)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", "1")
	h.Set("SNAP-Version", snap.ProtocolVersion)
	peercap.WriteRefusal(c, status, h, errorBody(status, code, msg, map[string]any{"retryAfter": 1}))
}
