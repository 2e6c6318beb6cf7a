package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Parse reads a Retry-After value in either of its forms (RFC 9110,
// section 10.2.3): whole seconds, or an HTTP-date read against now. It
// returns the wait asked for; 0 when v is empty, does not parse, or names
// a moment already past. A number of seconds too large for a Duration is
// the largest Duration: callers bound the wait they are willing to make.
func Parse(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		return Seconds(float64(secs))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Seconds is a wait given in seconds (a SNAP error's data.retryAfter, a
// JSON number) as a Duration: 0 for none or a negative or NaN value, the
// largest Duration for one too large to hold.
func Seconds(secs float64) time.Duration {
	switch {
	case !(secs > 0):
		return 0
	case secs >= float64(math.MaxInt64/int64(time.Second)):
		return math.MaxInt64
	}
	return time.Duration(secs * float64(time.Second))
}
