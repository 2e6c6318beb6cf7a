package origins_test

import (
	"slices"
	"testing"

	"github.com/snapnode/snapnode/internal/origins"
)

func TestParse(t *testing.T) {
	l, err := origins.Parse([]string{"https://App.Example:443/", "http://localhost:5173", "http://a.example:80"})
	if err != nil {
		t.Fatal(err)
	}
	for o, want := range map[string]bool{
		"https://app.example": true, "http://localhost:5173": true, "http://a.example": true,
		"http://app.example": false, "http://localhost:5174": false, "null": false, "": false,
	} {
		if l.Has(o) != want {
			t.Errorf("Has(%q) = %v, want %v", o, !want, want)
		}
	}
	if l.Any() {
		t.Error("Any without *")
	}
	if l, _ := origins.Parse([]string{"*"}); !l.Any() || !l.Has("null") {
		t.Error(`"*" does not allow every origin`)
	}
	for _, bad := range []string{"app.example", "ftp://x", "https://x/path", "https://x?q", "https://", "http://u@x"} {
		if _, err := origins.Parse([]string{bad}); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

func TestLoopback(t *testing.T) {
	for o, want := range map[string]bool{
		"http://localhost:5173": true, "https://localhost": true, "http://app.localhost:3000": true,
		"http://127.0.0.1:8080": true, "http://127.9.9.9": true, "http://[::1]:80": true,
		"https://evil.example": false, "http://localhost.evil.example": false, "http://192.168.1.2": false,
		"null": false, "": false, "file://localhost": false,
	} {
		if origins.Loopback(o) != want {
			t.Errorf("Loopback(%q) = %v, want %v", o, !want, want)
		}
	}
}

func TestHosts(t *testing.T) {
	h, err := origins.ParseHosts([]string{"Node.Example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"": true, "127.0.0.1:7448": true, "[::1]:7448": true, "192.0.2.7": true, "localhost:7448": true,
		"LOCALHOST": true, "app.localhost:1": true, "node.example.com": true, "node.example.com.:443": true,
		"192.0.2.7.:7448": true, "[fe80::1%25eth0]:7448": true, "[FE80::1]": true,
		"evil.example:7448": false, "localhost.evil.example": false, "example.com": false,
	} {
		if h.Allows(host) != want {
			t.Errorf("Allows(%q) = %v, want %v", host, !want, want)
		}
	}
	if h, _ := origins.ParseHosts([]string{"*"}); !h.Allows("evil.example") {
		t.Error(`"*" does not allow every host`)
	}
	// An address, which is answered anyway, is taken in a list: the
	// host of an http_listen or http_public_url on IPv6.
	if _, err := origins.ParseHosts([]string{"::1", "[::1]", "fe80::1%eth0", "192.0.2.7"}); err != nil {
		t.Errorf("ParseHosts of addresses: %v", err)
	}
	for _, bad := range []string{"https://node.example.com", "node.example.com:443", "a/b", ""} {
		if _, err := origins.ParseHosts([]string{bad}); err == nil {
			t.Errorf("ParseHosts(%q): no error", bad)
		}
	}
}

// Changes compares the lists as browsers send origins: an entry written
// otherwise (case, default port, trailing slash) is no change.
func TestOriginChanges(t *testing.T) {
	parse := func(list ...string) origins.List {
		l, err := origins.Parse(list)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		old, next      origins.List
		added, removed []string
	}{
		{parse(), parse(), nil, nil},
		{parse("https://a.example"), parse("https://A.example:443/"), nil, nil},
		{parse("https://a.example", "https://c.example"), parse("https://c.example", "https://b.example", "http://b.example"),
			[]string{"http://b.example", "https://b.example"}, []string{"https://a.example"}},
		{parse("https://a.example"), parse("*", "https://a.example"), []string{"*"}, nil},
		{parse("*"), parse(), nil, []string{"*"}},
	} {
		added, removed := origins.Changes(c.old, c.next)
		if !slices.Equal(added, c.added) || !slices.Equal(removed, c.removed) {
			t.Errorf("Changes(%v, %v) = %q, %q; want %q, %q", c.old.Origins(), c.next.Origins(), added, removed, c.added, c.removed)
		}
	}
}
