package policy

import (
	"slices"
	"testing"
)

func TestInSandbox(t *testing.T) {
	for _, tc := range []struct {
		path string
		in   bool
	}{
		{"/sandbox/", true},
		{"/sandbox/a.txt", true},
		{"/sandbox/a/b/c.md", true},
		{"/sandbox/a/", true},
		{"/sandbox/..a/b..", true},
		{"/sandbox/...", true},
		{"/sandbox/é.md", true},
		{"/sandbox/%2e%2e/a", true}, // a name, not an escape: nothing decodes it
		{"/sandbox", false},
		{"/sandbox//", false},
		{"/sandbox//a", false},
		{"/sandbox/a//b", false},
		{"/sandbox/a//", false},
		{"/sandbox/..", false},
		{"/sandbox/../", false},
		{"/sandbox/../etc", false},
		{"/sandbox/a/../../etc", false},
		{"/sandbox/a/..", false},
		{"/sandbox/.", false},
		{"/sandbox/./a", false},
		{"/sandbox/a\x00", false},
		{"/sandbox/a\nb", false},
		{"/sandbox/a\x7f", false},
		{"/sandbox/a\u0085", false},
		{"/sandbox/\xff", false},
		{"/Sandbox/a", false},
		{"sandbox/a", false},
		{"/sandboxa", false},
		{"/etc/passwd", false},
		{"", false},
		{"//sandbox/a", false},
		{" /sandbox/a", false},
	} {
		if got := inSandbox(tc.path); got != tc.in {
			t.Errorf("inSandbox(%q) = %v, want %v", tc.path, got, tc.in)
		}
	}
}

func TestPathParents(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/sandbox/", []string{"/"}},
		{"/sandbox/a.md", []string{"/", "/sandbox/", "/sandbox/a.md/"}},
		{"/sandbox/docs/a.md", []string{"/", "/sandbox/", "/sandbox/docs/", "/sandbox/docs/a.md/"}},
		{"/sandbox/docs/", []string{"/", "/sandbox/"}},
		{"/sandbox/docs", []string{"/", "/sandbox/", "/sandbox/docs/"}},
	} {
		if got := pathParents(tc.path); !slices.Equal(got, tc.want) {
			t.Errorf("pathParents(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestEffectString(t *testing.T) {
	for e, want := range map[Effect]string{Deny: "deny", Confirm: "confirm", Permit: "permit", Effect(7): "effect(7)"} {
		if got := e.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(e), got, want)
		}
	}
	if !(Deny < Confirm && Confirm < Permit) {
		t.Error("effects are not ordered from the strictest")
	}
	var zero Decision
	if zero.Effect != Deny {
		t.Error("the zero Decision does not deny")
	}
}
