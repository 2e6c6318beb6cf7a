package embedded

import (
	"log/slog"
	"testing"

	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
)

// Anyone may connect and read slowly, again and again: each client cut
// as too slow was logged at info, one line each. The relay logs
// logcap.PerMinute of them a minute, the next line counting the rest.
func TestSlowClientsLoggedBounded(t *testing.T) {
	const n = 100
	r := startRelay(t, Config{})
	logs := &testutil.Records{}
	for range n {
		c := r.newConn(&recordTransport{flushed: make(chan struct{}, 8)}, slog.New(logs))
		c.slow()
	}
	if got := r.slowCuts.Load(); got != n {
		t.Fatalf("%d slow clients cut, want %d", got, n)
	}
	if got := logs.Logged("disconnecting slow client"); len(got) != logcap.PerMinute {
		t.Fatalf("%d lines for %d slow clients, want %d", len(got), n, logcap.PerMinute)
	}
	r.clock.Advance(60)
	r.newConn(&recordTransport{flushed: make(chan struct{}, 8)}, slog.New(logs)).slow()
	got := logs.Logged("disconnecting slow client")
	notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
	if notLogged != n-logcap.PerMinute {
		t.Fatalf("the next minute's line says %d not logged before it, want %d", notLogged, n-logcap.PerMinute)
	}
}
