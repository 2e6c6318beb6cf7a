package snaphttp

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestPeerKey(t *testing.T) {
	cases := []struct{ remote, want string }{
		{"192.0.2.1:5000", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::1]:1", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.9]:80", "192.0.2.9"},
		{"[fe80::1%eth0]:80", "fe80::"},
		{"garbage", "invalid IP"},
	}
	for _, tc := range cases {
		r := &http.Request{RemoteAddr: tc.remote}
		if got := peerKey(r).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.remote, got, tc.want)
		}
	}
}

func TestConnCounter(t *testing.T) {
	c := newConnCounter(2, 3)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	steps := []struct {
		key  netip.Addr
		want int
	}{{a, 0}, {a, 0}, {a, 429}, {b, 0}, {b, 503}}
	for i, s := range steps {
		if got := c.acquire(s.key); got != s.want {
			t.Fatalf("step %d: %d, want %d", i, got, s.want)
		}
	}
	c.release(a)
	if got := c.acquire(b); got != 0 {
		t.Errorf("after a release: %d", got)
	}
	c.release(b)
	c.release(b)
	c.release(a)
	if c.count() != 0 || len(c.per) != 0 {
		t.Errorf("count %d, %d peers kept", c.count(), len(c.per))
	}
}

func TestAcceptsEventStream(t *testing.T) {
	cases := []struct {
		values []string
		want   bool
	}{
		{[]string{"text/event-stream"}, true},
		{[]string{"Text/Event-Stream"}, true},
		{[]string{"application/json, text/event-stream;q=0.5"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"*/*"}, false},
		{[]string{"application/json"}, false},
		{[]string{"text/event-streamx"}, false},
		{nil, false},
	}
	for _, tc := range cases {
		if got := acceptsEventStream(tc.values); got != tc.want {
			t.Errorf("%q: %v", tc.values, got)
		}
	}
}
