// Package logcap bounds the log lines that another party can cause at
// will, one per message it sends: a relay's NOTICEs, a forged reply, a
// peer's calls to a service that fails. A Limiter lets PerMinute lines
// through a minute and counts the rest; the next line it lets through
// tells how many were not logged before it, as not_logged_before.
//
//	var rejected logcap.Limiter // one for each kind of line, or source
//	rejected.Log(ctx, logger, now, slog.LevelWarn, "rejected a reply", "err", err)
package logcap

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// PerMinute is how many lines a Limiter lets through a minute.
const PerMinute = 10

// NotLoggedKey is the attribute that tells, on a line a Limiter let
// through, how many lines it held back since the one before.
const NotLoggedKey = "not_logged_before"

// Limiter bounds the lines logged through it to PerMinute a minute. The
// zero Limiter is ready to use; it is safe for concurrent use and must
// not be copied after first use.
type Limiter struct {
	mu         sync.Mutex
	since      time.Time // start of the current minute
	lines      int       // logged since
	suppressed int       // not logged since the last line
}

// Log logs msg with args at level to logger, unless PerMinute lines went
// through l in the minute that now is in: that line is only counted, and
// the next line logged adds the count as NotLoggedKey. A line logger
// would drop at its level is neither logged nor counted. now is the
// caller's clock.
func (l *Limiter) Log(ctx context.Context, logger *slog.Logger, now time.Time, level slog.Level, msg string, args ...any) {
	if !logger.Enabled(ctx, level) {
		return
	}
	l.mu.Lock()
	if now.Sub(l.since) >= time.Minute || now.Before(l.since) {
		l.since, l.lines = now, 0
	}
	if l.lines >= PerMinute {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.lines++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, NotLoggedKey, suppressed)
	}
	logger.Log(ctx, level, msg, args...)
}
