package identity_test

import (
	"errors"
	"testing"

	"github.com/snapnode/snapnode/identity"
)

// FuzzParseAddress: decoding never panics, fails only with an
// *AddressError naming a rule, and what it accepts re-encodes to itself.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397",
		"tb1pfaugy8cg7yvnx0uczwtwck2ph8m85pw9xqhvkup3scdg0xamp7ashlr2m6",
		"bc1p5d7rjq7g6rdk2yhzqnt9dp8wvscrplqk0zwy63lmgreu9jzyt0mqf3xvn8",
		"BC1P9VR5NZFRHHNTJAULMER02VYDAS60GE8SRY567KMXHCC0C0STXQGSGSE397",
		"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "", "bc1", "tb1p",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := identity.ParseAddress(s)
		if err != nil {
			var ae *identity.AddressError
			if !errors.As(err, &ae) || ae.Rule == nil {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if got := a.String(); got != s {
			t.Fatalf("decode then encode: %q became %q", s, got)
		}
	})
}

// FuzzAddressRoundTrip: decode(encode(x)) = x for every 32-byte program on
// both networks.
func FuzzAddressRoundTrip(f *testing.F) {
	f.Add(make([]byte, 32), false)
	f.Add([]byte("0123456789abcdef0123456789abcdef"), true)
	f.Fuzz(func(t *testing.T, b []byte, testnet bool) {
		if len(b) != 32 {
			return
		}
		var q [32]byte
		copy(q[:], b)
		n := identity.Mainnet
		if testnet {
			n = identity.Testnet
		}
		s := identity.EncodeAddress(n, q)
		a, err := identity.ParseAddress(s)
		if err != nil {
			t.Fatalf("ParseAddress(EncodeAddress(%x)) = %v", q, err)
		}
		if a.Key != q || a.Network != n || len(s) != identity.AddressLength {
			t.Fatalf("round trip: %x %v → %s → %x %v", q, n, s, a.Key, a.Network)
		}
	})
}
