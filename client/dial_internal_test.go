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
		"2606:4700::1", "::ffff:93.184.215.14", "64:ff9b::5db8:d70e", "2002:5db8:d70e::1",
	} {
		if class := nonPublic(netip.MustParseAddr(s)); class != "" {
			t.Errorf("%s: %s; want public", s, class)
		}
	}
}
