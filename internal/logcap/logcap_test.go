package logcap_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
)

// notLogged is the count of lines r says were not logged before it.
func notLogged(r slog.Record) int64 { return testutil.AttrInt64(r, logcap.NotLoggedKey) }

func TestLimiterBoundsAMinute(t *testing.T) {
	h := &testutil.Records{}
	log := slog.New(h)
	var l logcap.Limiter
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		l.Log(t.Context(), log, start.Add(time.Duration(i)*time.Millisecond), slog.LevelWarn, "line", "i", i)
	}
	if len(h.All()) != logcap.PerMinute {
		t.Fatalf("%d lines logged for 1000 in a second, want %d", len(h.All()), logcap.PerMinute)
	}
	for _, r := range h.All() {
		if n := notLogged(r); n != 0 {
			t.Fatalf("a line of the first minute says %d not logged", n)
		}
	}
	l.Log(t.Context(), log, start.Add(time.Minute), slog.LevelWarn, "line")
	if len(h.All()) != logcap.PerMinute+1 {
		t.Fatalf("%d lines, want the next minute's first logged", len(h.All()))
	}
	if n := notLogged(h.All()[len(h.All())-1]); n != 1000-logcap.PerMinute {
		t.Fatalf("the next minute's first line says %d not logged, want %d", n, 1000-logcap.PerMinute)
	}
	l.Log(t.Context(), log, start.Add(time.Minute+time.Second), slog.LevelWarn, "line")
	if n := notLogged(h.All()[len(h.All())-1]); n != 0 {
		t.Fatalf("the line after says %d not logged, want none", n)
	}
}

func TestLimiterCountsNoLineTheLoggerDrops(t *testing.T) {
	h := &testutil.Records{}
	debugOff := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var l logcap.Limiter
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for range 100 {
		l.Log(t.Context(), debugOff, now, slog.LevelDebug, "dropped at its level")
	}
	l.Log(t.Context(), slog.New(h), now, slog.LevelWarn, "line")
	if len(h.All()) != 1 || notLogged(h.All()[0]) != 0 {
		t.Fatalf("lines below the logger's level were counted: %d lines, %d not logged", len(h.All()), notLogged(h.All()[0]))
	}
}
