package snaphttp

import (
	"net/http"
	"net/netip"

	"github.com/snapnode/snapnode/internal/peercap"
)

// peerKey is the rate-limiting and connection-counting key of a request's
// remote address: the IPv4 address, or the /64 of an IPv6 one. An address
// that does not parse (a test's fake RemoteAddr) shares the zero key.
func peerKey(r *http.Request) netip.Addr { return peercap.Key(r.RemoteAddr) }
