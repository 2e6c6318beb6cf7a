package lowerhex

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		n    int
		want bool
	}{
		{"every digit", "0123456789abcdef", 16, true},
		{"empty of length 0", "", 0, true},
		{"too short", "abc", 4, false},
		{"too long", "abcde", 4, false},
		{"upper case", "ABCD", 4, false},
		{"past f", "abcg", 4, false},
		{"punctuation next to the digits", "/:`@", 4, false},
		{"multi-byte", "é1", 3, false},
		{"sha-256", strings.Repeat("0f", 32), 64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.s, tc.n); got != tc.want {
				t.Errorf("Valid(%q, %d) = %v, want %v", tc.s, tc.n, got, tc.want)
			}
		})
	}
}

func FuzzValid(f *testing.F) {
	f.Add("00ff", 4)
	f.Add("0G", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		want := len(s) == n && strings.Trim(s, "0123456789abcdef") == ""
		if got := Valid(s, n); got != want {
			t.Errorf("Valid(%q, %d) = %v, want %v", s, n, got, want)
		}
	})
}
