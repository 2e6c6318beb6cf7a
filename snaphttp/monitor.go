package snaphttp

import (
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// Monitor returns h limited per peer (an IPv4 address or an IPv6 /64) to
// r requests a second with bursts of burst, as a Server limits its
// /healthz and /metrics (Config.MonitorRate): without a token a request
// gets 429 with Retry-After and h is not called. It is for monitoring
// endpoints served on a listener of their own; r <= 0 takes
// DefaultMonitorRate, burst <= 0 DefaultMonitorBurst, rate.Inf disables.
func Monitor(h http.Handler, r rate.Limit, burst int) http.Handler {
	if r <= 0 {
		r = DefaultMonitorRate
	}
	if burst <= 0 {
		burst = DefaultMonitorBurst
	}
	l := newLimits(r, burst, DefaultMaxPeers, time.Now)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if admitPeer(l, w, req) {
			h.ServeHTTP(w, req)
		}
	})
}
