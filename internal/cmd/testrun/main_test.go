package main

import (
	"slices"
	"strings"
	"testing"
)

func TestLibsecpRun(t *testing.T) {
	for _, tc := range []struct {
		name         string
		args         []string
		cgo, libsecp bool
		want         []string // the second run's arguments
		why          string   // or a part of why it is left out
	}{
		{"race kept", []string{"-race", "./..."}, true, true,
			[]string{"-tags", "libsecp256k1", "-race", "./internal/secp", "./identity", "./snap", "./relay", "./snapnostr"}, ""},
		{"short kept, others not", []string{"-short", "-count=1", "./..."}, true, true,
			[]string{"-tags", "libsecp256k1", "-short", "./internal/secp", "./identity", "./snap", "./relay", "./snapnostr"}, ""},
		{"no library", []string{"-race", "./..."}, true, false, nil, "apt-get install libsecp256k1-dev"},
		{"no cgo", []string{"./..."}, false, false, nil, "need cgo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := libsecpRun(tc.args, tc.cgo, tc.libsecp)
			if !slices.Equal(got, tc.want) {
				t.Errorf("arguments %q, want %q", got, tc.want)
			}
			if tc.why == "" && why != "" || tc.why != "" && !strings.Contains(why, tc.why) {
				t.Errorf("why %q, want %q", why, tc.why)
			}
		})
	}
}

func TestWithTimeout(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"-race", "./..."}, []string{"-timeout", defaultTimeout, "-race", "./..."}},
		{[]string{"-timeout", "5m", "./..."}, []string{"-timeout", "5m", "./..."}},
		{[]string{"-timeout=5m", "./..."}, []string{"-timeout=5m", "./..."}},
		{[]string{"--timeout=5m", "./..."}, []string{"--timeout=5m", "./..."}},
		{[]string{"-test.timeout=5m", "./..."}, []string{"-test.timeout=5m", "./..."}},
	} {
		if got := withTimeout(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("withTimeout(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
