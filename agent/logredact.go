package agent

import (
	"context"
	"log/slog"
)

// RedactingLogger returns a logger that writes to l's handler every
// record with its string and error values, in groups too, passed through
// redact: the log lines of the runtime, of a worker and of a delegate
// carry what the other side said (a model server's error body, a worker's
// error output, a delegate's failure), which may name a secret. Other
// values are kept as they are.
func RedactingLogger(l *slog.Logger, redact func(string) string) *slog.Logger {
	return slog.New(&redactingHandler{h: l.Handler(), redact: redact})
}

// redactingHandler is a slog.Handler that passes each record to h with
// its string and error values redacted (see RedactingLogger).
type redactingHandler struct {
	h      slog.Handler
	redact func(string) string
}

func (r *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.h.Enabled(ctx, l)
}

func (r *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = r.attr(a)
	}
	return &redactingHandler{h: r.h.WithAttrs(out), redact: r.redact}
}

func (r *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{h: r.h.WithGroup(name), redact: r.redact}
}

// attr is a with its strings and errors redacted, in groups too; other
// values are kept as they are.
func (r *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = r.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && err != nil {
			return slog.String(a.Key, r.redact(err.Error()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
