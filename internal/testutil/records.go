package testutil

import (
	"context"
	"log/slog"
	"sync"
)

// Records is a slog.Handler that keeps every record logged to it, at
// every level, for a test that counts what a logger wrote:
//
//	logs := &testutil.Records{}
//	logger := slog.New(logs)
//	…
//	if n := len(logs.Logged("request failed")); n > 10 { … }
type Records struct {
	mu  sync.Mutex
	all []slog.Record
}

var _ slog.Handler = (*Records)(nil)

func (h *Records) Enabled(context.Context, slog.Level) bool { return true }
func (h *Records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *Records) WithGroup(string) slog.Handler            { return h }

func (h *Records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r.Clone())
	return nil
}

// All returns every record logged, in order.
func (h *Records) All() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.all...)
}

// Logged returns the records of message msg, in the order logged.
func (h *Records) Logged(msg string) []slog.Record {
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

// AttrInt64 returns the int64 attribute key of r, or 0 when r has none
// (or it is of another kind).
func AttrInt64(r slog.Record, key string) int64 {
	var n int64
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key && a.Value.Kind() == slog.KindInt64 {
			n = a.Value.Int64()
			return false
		}
		return true
	})
	return n
}
