package client

import (
	"net/netip"
	"testing"
)

// Public addresses are not refused, written in IPv4, IPv6, IPv4-mapped,
// NAT64 or 6to4 form; the bounds of the shared address space
// (100.64.0.0/10) are exact.
func TestNonPublicLetsPublicThrough(t *testing.T) {
	for _, s := range []string{
		"93.184.215.14", "100.63.255.255", "100.128.0.1", "1.1.1.1",
		"2606:4700::1",
		// The bounds of the special-purpose blocks are exact.
		"191.255.255.255", "192.0.1.0", "192.0.3.0", "198.17.255.255", "198.20.0.0",
		"198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0",
		"2001:db7:ffff::1", "2001:db9::1", "2001:4860::8888",
		"::ffff:93.184.215.14", "64:ff9b::5db8:d70e", "2002:5db8:d70e::1",
	} {
		if class := nonPublic(netip.MustParseAddr(s)); class != "" {
			t.Errorf("%s: %s; want public", s, class)
		}
	}
}
