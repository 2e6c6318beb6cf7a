package snap_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// A peer decides how many requests the server answers: when the handling
// of each panics (a library's bug some input finds) or fails with an
// error that is not SNAP's (a database down), each request was logged at
// error, one line each. Each line is logged logcap.PerMinute a minute,
// the next counting those that were not; the answers are unchanged.
func TestServerFailuresLoggedBounded(t *testing.T) {
	const n = 50
	clock := testclock.New(time.Unix(t0, 0))
	logs := &testutil.Records{}
	r := snap.NewRouter()
	r.Handle("tasks/cancel", func(context.Context, *snap.Verified) (any, error) { panic("boom") })
	r.Handle("tasks/get", func(context.Context, *snap.Verified) (any, error) { return nil, errors.New("database down") })
	r.HandleStream("message/stream", func(context.Context, *snap.Verified, func(any) error) (any, error) { panic("boom") })
	s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: clock.Now, Logger: slog.New(logs),
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: clock.Now})})
	ask := func(i int, method string) {
		m := &snap.Message{ID: fmt.Sprintf("%s-%d", method[:5], i), Version: "0.1", Type: snap.TypeRequest, Method: method,
			From: keyA.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet),
			Payload: []byte(`{"taskId":"t"}`), Timestamp: clock.Now().Unix()}
		if err := m.Sign(keyA); err != nil {
			t.Fatal(err)
		}
		raw, _ := m.MarshalJSON()
		resp := s.Serve(t.Context(), snap.Inbound{Raw: raw}, func(*snap.Message) error { return nil })
		if resp.ErrorCode() != snap.CodeInternal {
			t.Fatalf("%s: code %d, want 5001", method, resp.ErrorCode())
		}
	}
	methods := []string{"tasks/cancel", "tasks/get", "message/stream"}
	lines := []string{"snap handler panicked", "snap request failed", "snap stream handler panicked"}
	for i := range n {
		for _, m := range methods {
			ask(i, m)
		}
	}
	for _, msg := range lines {
		if got := logs.Logged(msg); len(got) != logcap.PerMinute {
			t.Errorf("%q: %d lines for %d requests, want %d", msg, len(got), n, logcap.PerMinute)
		}
	}
	clock.Advance(time.Minute)
	for _, m := range methods {
		ask(n, m)
	}
	for _, msg := range lines {
		got := logs.Logged(msg)
		notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
		if notLogged != n-logcap.PerMinute {
			t.Errorf("%q: the next minute's line says %d not logged before it, want %d", msg, notLogged, n-logcap.PerMinute)
		}
	}
}
