package origins_test

import (
	"testing"

	"github.com/snapnode/snapnode/internal/origins"
)

// FuzzNormalize feeds arbitrary entries, as an operator writes them in
// relay_allowed_origins or http_allowed_origins, to Normalize and
// ParseHosts. Neither panics; an origin Normalize accepts it writes in a
// form it keeps as it is, which the list Parse makes of the entry allows;
// a host name ParseHosts keeps is allowed in a Host, with a port or
// without.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"https://app.example.com", "http://LOCALHOST:5173/", "https://x:443", "http://[::1]:80",
		"*", "ftp://x", "http://u@x", "http://x/p", "node.example.com", "Node.Example.COM.", "[::1]", "a:b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		if n, err := origins.Normalize(entry); err == nil {
			if again, err := origins.Normalize(n); err != nil || again != n {
				t.Fatalf("Normalize(%q) = %q, which normalizes to %q, %v", entry, n, again, err)
			}
			l, err := origins.Parse([]string{entry})
			if err != nil || !l.Has(n) {
				t.Fatalf("Parse([%q]) = %v, %v: does not allow %q", entry, l.Origins(), err, n)
			}
		}
		h, err := origins.ParseHosts([]string{entry})
		if err != nil || entry == origins.Any {
			return
		}
		if !h.Allows(entry) {
			t.Fatalf("ParseHosts([%q]) does not allow the Host %q", entry, entry)
		}
	})
}
