package sqldb

import "time"

// Micros is t as the components store a time in a BIGINT column:
// microseconds since the Unix epoch, and 0 for the zero time (never
// set), so that both dialects compare and index it as a number.
func Micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// FromMicros is the time of a column written by Micros, in UTC: 0 is the
// zero time.
func FromMicros(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}
