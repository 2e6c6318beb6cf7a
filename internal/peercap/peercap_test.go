package peercap_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/snapnode/snapnode/internal/peercap"
)

func TestKey(t *testing.T) {
	cases := []struct{ remote, want string }{
		{"192.0.2.7:4000", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:4000", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::9]:443", "2001:db8:1:2::"},
		{"[fe80::1%eth0]:80", "fe80::"},
		{"[::1]:5000", "::1"},
		{"[::ffff:127.0.0.1]:5000", "127.0.0.1"},
		{"198.51.100.1", "198.51.100.1"},
		{"garbage", "invalid IP"},
	}
	for _, tc := range cases {
		if got := peercap.Key(tc.remote).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.remote, got, tc.want)
		}
	}
}

func TestCounter(t *testing.T) {
	c := peercap.New(2, 3, nil)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	steps := []struct {
		key  netip.Addr
		want int
	}{{a, 0}, {a, 0}, {a, http.StatusTooManyRequests}, {b, 0}, {b, http.StatusServiceUnavailable}}
	for i, s := range steps {
		if got := c.Acquire(s.key); got != s.want {
			t.Fatalf("step %d: %d, want %d", i, got, s.want)
		}
	}
	c.Release(a)
	if got := c.Acquire(b); got != 0 {
		t.Errorf("after a release: %d", got)
	}
	c.Release(b)
	c.Release(b)
	c.Release(a)
	if c.Count() != 0 || c.Peers() != 0 {
		t.Errorf("count %d, %d peers kept", c.Count(), c.Peers())
	}
}

// An exempt peer counts in the total only, and leaves no entry behind.
func TestCounterExempt(t *testing.T) {
	loop := netip.MustParseAddr("127.0.0.1")
	c := peercap.New(1, 3, netip.Addr.IsLoopback)
	for i := range 3 {
		if got := c.Acquire(loop); got != 0 {
			t.Fatalf("loopback connection %d: %d", i, got)
		}
	}
	if c.Peers() != 0 {
		t.Fatalf("%d peers counted for exempt connections", c.Peers())
	}
	if got := c.Acquire(netip.MustParseAddr("192.0.2.1")); got != http.StatusServiceUnavailable {
		t.Fatalf("over the total: %d", got)
	}
	for range 3 {
		c.Release(loop)
	}
	if c.Count() != 0 {
		t.Fatalf("count %d after the releases", c.Count())
	}
}
