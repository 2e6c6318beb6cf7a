package embedded

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/logcap"
)

// records keeps the records logged to it.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r.Clone())
	return nil
}

// with returns the records of message msg.
func (h *records) with(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.all {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// Anyone may connect and read slowly, again and again: each client cut
// as too slow was logged at info, one line each. The relay logs
// logcap.PerMinute of them a minute, the next line counting the rest.
func TestSlowClientsLoggedBounded(t *testing.T) {
	const n = 100
	r := startRelay(t, Config{})
	logs := &records{}
	for range n {
		c := r.newConn(&recordTransport{flushed: make(chan struct{}, 8)}, slog.New(logs))
		c.slow()
	}
	if got := r.slowCuts.Load(); got != n {
		t.Fatalf("%d slow clients cut, want %d", got, n)
	}
	if got := logs.with("disconnecting slow client"); len(got) != logcap.PerMinute {
		t.Fatalf("%d lines for %d slow clients, want %d", len(got), n, logcap.PerMinute)
	}
	r.clock.Advance(60)
	r.newConn(&recordTransport{flushed: make(chan struct{}, 8)}, slog.New(logs)).slow()
	got := logs.with("disconnecting slow client")
	var notLogged int64
	got[len(got)-1].Attrs(func(a slog.Attr) bool {
		if a.Key == logcap.NotLoggedKey {
			notLogged = a.Value.Int64()
		}
		return true
	})
	if notLogged != n-logcap.PerMinute {
		t.Fatalf("the next minute's line says %d not logged before it, want %d", notLogged, n-logcap.PerMinute)
	}
}
