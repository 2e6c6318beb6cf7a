package retryafter

import (
	"math"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"90", 90 * time.Second},
		{" 7 ", 7 * time.Second},
		{"99999999999999999", math.MaxInt64},
		{"Fri, 27 Nov 2026 12:01:30 GMT", 90 * time.Second},
		{"Fri, 27 Nov 2026 11:59:00 GMT", 0},
		{"soon", 0},
	} {
		if got := Parse(c.v, now); got != c.want {
			t.Errorf("Parse(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, c := range []struct {
		secs float64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {math.NaN(), 0}, {1.5, 1500 * time.Millisecond}, {1e30, math.MaxInt64},
	} {
		if got := Seconds(c.secs); got != c.want {
			t.Errorf("Seconds(%v) = %v, want %v", c.secs, got, c.want)
		}
	}
}
