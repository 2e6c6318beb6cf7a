package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, def time.Duration
		want    time.Duration
	}{
		{"zero takes the default", 0, time.Second, time.Second},
		{"negative takes the default", -5, time.Second, time.Second},
		{"positive is kept", 3 * time.Millisecond, time.Second, 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.in
			Positive(&v, tc.def)
			if v != tc.want {
				t.Errorf("Positive(%v, %v) = %v, want %v", tc.in, tc.def, v, tc.want)
			}
		})
	}
	f := -0.5
	Positive(&f, 2.5)
	if f != 2.5 {
		t.Errorf("Positive(-0.5, 2.5) = %v, want 2.5", f)
	}
}
