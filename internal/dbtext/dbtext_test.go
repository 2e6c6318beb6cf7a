package dbtext_test

import (
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/internal/dbtext"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain text, é and 日本", "plain text, é and 日本"},
		{"a\x00b", "a\uFFFDb"},
		{"\xff\xfe", "\uFFFD"}, // a run of bad bytes is one replacement
		{"ok\x00\xc3", "ok\uFFFD\uFFFD"},
	} {
		if got := dbtext.Clean(c.in); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func ExampleClean() {
	fmt.Printf("%+q\n", dbtext.Clean("stuck on\x00 a.md"))
	// Output: "stuck on\ufffd a.md"
}
