package shellword

import (
	"os/exec"
	"testing"
)

// Each word, given to a shell, is the value again.
func TestQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"", "t1", "/srv/node-2/data", "my node", "it's", "$HOME", "a\nb", "`x`", "'",
		// Every metacharacter of a POSIX shell, whitespace, bytes that
		// are not UTF-8, a leading dash or tilde, a glob.
		"a;b|c&d<e>f(g)h", "*", "?", "[ab]", "{a,b}", "!x", "#x", "~", "~/x", "a=~", "x\ty", "\\", "\"", "\xff\xfe", "-n", "--", "a b\r\n"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: the shell read %q (%v)", s, Quote(s), out, err)
		}
	}
	if got := Quote("t1"); got != "t1" {
		t.Errorf("Quote(t1) = %s, want it as it is", got)
	}
}
