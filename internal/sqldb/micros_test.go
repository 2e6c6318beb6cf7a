package sqldb

import (
	"testing"
	"time"
)

func TestMicros(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		name string
		in   time.Time
		n    int64
		back time.Time
	}{
		{"zero time is 0", time.Time{}, 0, time.Time{}},
		{"a time keeps its microseconds, in UTC", at, at.UnixMicro(), at.Truncate(time.Microsecond).UTC()},
		{"the epoch itself", time.Unix(0, 1000), 1, time.Unix(0, 1000).UTC()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Micros(tc.in)
			if n != tc.n {
				t.Fatalf("Micros(%v) = %d, want %d", tc.in, n, tc.n)
			}
			back := FromMicros(n)
			if !back.Equal(tc.back) || back.Location() != tc.back.Location() {
				t.Errorf("FromMicros(%d) = %v, want %v", n, back, tc.back)
			}
		})
	}
}
