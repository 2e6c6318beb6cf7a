package proposal

import (
	"slices"
	"testing"
)

func TestDedupe(t *testing.T) {
	tests := []struct{ in, want []string }{
		{nil, nil},
		{[]string{"/sandbox/a"}, []string{"/sandbox/a"}},
		{[]string{"/sandbox/b", "/sandbox/a", "/sandbox/b", "/sandbox/a", "/sandbox/c"}, []string{"/sandbox/b", "/sandbox/a", "/sandbox/c"}},
	}
	for _, tt := range tests {
		if got := Dedupe(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Dedupe(%q) = %q, want %q (first-seen order)", tt.in, got, tt.want)
		}
	}
}
