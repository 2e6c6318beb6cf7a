package tasks

import (
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/internal/testutil"
)

// A peer decides how many requests the service answers: while its store
// fails, each request was logged at error, one line each. The line is
// logged logcap.PerMinute a minute, the next counting those that were
// not; the answers (5001) are unchanged.
func TestRequestFailuresLoggedBounded(t *testing.T) {
	const n = 50
	clock := testclock.New(time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC))
	logs := &testutil.Records{}
	broken := NewService(brokenStore{NewMemoryStore(MemoryStoreOptions{MaxTasks: 10})}, ServiceOptions{Now: clock.Now, Logger: slog.New(logs)})
	r := fakeRouter{}
	broken.Register(r, nil)
	for range n {
		if _, err := r["tasks/get"](t.Context(), request(alice, "tasks/get", getPayload("t"))); err == nil {
			t.Fatal("no error from a broken store")
		}
	}
	if got := logs.Logged("tasks: request failed"); len(got) != logcap.PerMinute {
		t.Fatalf("%d lines for %d requests, want %d", len(got), n, logcap.PerMinute)
	}
	clock.Advance(time.Minute)
	_, _ = r["tasks/get"](t.Context(), request(alice, "tasks/get", getPayload("t")))
	got := logs.Logged("tasks: request failed")
	notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
	if notLogged != n-logcap.PerMinute {
		t.Fatalf("the next minute's line says %d not logged before it, want %d", notLogged, n-logcap.PerMinute)
	}
}
