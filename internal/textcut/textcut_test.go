package textcut_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/snapnode/snapnode/internal/textcut"
)

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abcd", 3, "abc"},
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"héllo", 1, "h"},
		{"héllo", 2, "h"}, // inside é
		{"héllo", 3, "hé"},
		{"€uro", 2, ""}, // inside €, its first character
		{"a😀b", 4, "a"},
		{"a😀b", 5, "a😀"},
		{"a\xffb", 2, "a\xff"}, // a stray byte counts as a start
		{"a\x80\x80b", 2, ""},  // nor does a continuation byte, stray or not
	} {
		if got := textcut.Prefix(c.s, c.n); got != c.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestShorten(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"shorter", 5, "short…"},
		{"héllo", 2, "h…"},
		{"", 0, ""},
	} {
		if got := textcut.Shorten(c.s, c.n, "…"); got != c.want {
			t.Errorf("Shorten(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// FuzzPrefix: the prefix is a prefix, within n bytes, and of valid text
// it is valid text no shorter than n-3 bytes (a character has at most 4).
func FuzzPrefix(f *testing.F) {
	for _, s := range []string{"", "abc", "héllo", "a😀b", "a\xffb"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		p := textcut.Prefix(s, n)
		if !strings.HasPrefix(s, p) || len(p) > max(n, 0) {
			t.Fatalf("Prefix(%q, %d) = %q", s, n, p)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(p) || len(p) < min(len(s), n)-3) {
			t.Fatalf("Prefix(%q, %d) = %q: not valid, or cut too short", s, n, p)
		}
	})
}

func ExampleShorten() {
	fmt.Println(textcut.Shorten("the relay said: too many subscriptions", 14, "…"))
	fmt.Println(textcut.Prefix("naïve", 3))
	// Output:
	// the relay said…
	// na
}
