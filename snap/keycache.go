package snap

import (
	"errors"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/secp"
)

// cachedKey is a decoded address and its lifted output key Q.
type cachedKey struct {
	addr identity.Address
	pub  *secp.PublicKey
}

// keyCache remembers decoded addresses so that a known sender costs a map
// look-up instead of a bech32m decode and a field square root (lift_x is
// about a tenth of a Schnorr verification). A nil *keyCache decodes every
// time.
type keyCache struct {
	c *bounded.Cache[string, *cachedKey]
}

func newKeyCache(max int) *keyCache { return &keyCache{bounded.NewCache[string, *cachedKey](max)} }

// lookup decodes addr, which names the given envelope field, or fails with
// 2005 naming the broken rule.
func (c *keyCache) lookup(field, addr string) (*cachedKey, *Error) {
	if c != nil {
		if k, ok := c.c.Get(addr); ok {
			return k, nil
		}
	}
	a, err := identity.ParseAddress(addr)
	if err != nil {
		return nil, addressError(field, addr, err)
	}
	pub, err := a.PublicKey()
	if err != nil {
		return nil, addressError(field, addr, err)
	}
	k := &cachedKey{addr: a, pub: pub}
	if c != nil {
		c.c.Put(addr, k)
	}
	return k, nil
}

// addressError is the 2005 IdentityInvalid error for an address that breaks
// one of identity's rules.
func addressError(field, value string, err error) *Error {
	reason := err.Error()
	var ae *identity.AddressError
	if errors.As(err, &ae) {
		reason = ae.Rule.Error()
		if ae.Detail != "" {
			reason += " (" + ae.Detail + ")"
		}
	}
	return identityInvalid(field, value, reason)
}

// tweakCache maps internal keys P (Nostr pubkeys) to their BIP-341 output
// keys Q, which cost a lift and a scalar multiplication to compute.
type tweakCache struct {
	c *bounded.Cache[[32]byte, [32]byte]
}

func newTweakCache(max int) *tweakCache {
	return &tweakCache{bounded.NewCache[[32]byte, [32]byte](max)}
}

func (c *tweakCache) of(p [32]byte) ([32]byte, error) {
	if q, ok := c.c.Get(p); ok {
		return q, nil
	}
	q, err := identity.OutputKeyOf(p)
	if err != nil {
		return q, err
	}
	c.c.Put(p, q)
	return q, nil
}
