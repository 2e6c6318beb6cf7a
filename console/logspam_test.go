package console_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
)

// Anyone who reaches the node's HTTP port may ask for the console's
// pages from another machine, or bring login links of their own making:
// each request was logged at warn, one line each. Each line is logged
// logcap.PerMinute a minute, the next counting those that were not.
func TestStrangersLoggedBounded(t *testing.T) {
	const n = 50
	logs := &testutil.Records{}
	r := newRig(t, func(c *console.Config) { c.Logger = slog.New(logs) })
	remote := func() {
		req := httptest.NewRequest("GET", "/console/", nil)
		req.RemoteAddr = "192.0.2.7:40000"
		w := httptest.NewRecorder()
		r.c.ServeHTTP(w, req)
		if w.Code != http.StatusForbidden {
			t.Fatalf("a client on another machine: %d, want 403", w.Code)
		}
	}
	guess := func(i int) {
		if w := r.do("GET", fmt.Sprintf("/console/login?token=guess%d", i), nil, nil, nil); w.Code != http.StatusUnauthorized {
			t.Fatalf("a login link made up: %d, want 401", w.Code)
		}
	}
	for i := range n {
		remote()
		guess(i)
	}
	lines := []string{"console: refused a client on another machine (console_remote is off)", "console: login refused"}
	for _, msg := range lines {
		if got := logs.Logged(msg); len(got) != logcap.PerMinute {
			t.Errorf("%q: %d lines for %d requests, want %d", msg, len(got), n, logcap.PerMinute)
		}
	}
	r.clock.Advance(time.Minute)
	remote()
	guess(n)
	for _, msg := range lines {
		got := logs.Logged(msg)
		notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
		if notLogged != n-logcap.PerMinute {
			t.Errorf("%q: the next minute's line says %d not logged before it, want %d", msg, notLogged, n-logcap.PerMinute)
		}
	}
}
