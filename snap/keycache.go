package snap

import (
	"errors"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/secp"
)

// cachedKey is a decoded address and its lifted output key Q, with the
// count of its signatures verified, toward its table.
type cachedKey struct {
	addr identity.Address
	pub  *secp.PublicKey
	uses secp.Uses
}

// keyCache remembers decoded addresses so that a known sender costs a map
// look-up instead of a bech32m decode and a field square root (lift_x is
// about a tenth of a Schnorr verification). A sender whose key verifies
// secp.PromoteAfter signatures earns a table of its key's multiples that
// makes its next verifications about twice as fast; at most
// precomputedKeys senders hold one (secp.Tables). A nil *keyCache decodes
// every time and keeps no table.
type keyCache struct {
	c      *bounded.Cache[string, *cachedKey]
	tables *secp.Tables[[32]byte] // by output key Q
}

// precomputedKeys bounds the senders of a Validator holding a table of
// their key: secp.PrecomputedBytes each, 2.7 MB for the 64 in the pure-Go
// build. Each table is earned by secp.PromoteAfter signatures that
// verified under its key, and once all are held a Validator replaces one
// at most once per secp.ReplaceEvery verifications, so a flood of valid
// messages from fresh keys raises its verification CPU by at most about
// 10 %; a busy sender's table is not given up to another, and a sender
// with steady traffic still earns one under such a flood (secp.Tables).
const precomputedKeys = 64

func newKeyCache(max int) *keyCache {
	return &keyCache{c: bounded.NewCache[string, *cachedKey](max), tables: secp.NewTables[[32]byte](precomputedKeys)}
}

// verify checks the 128-hex BIP-340 signature sigHex of d against k's
// key, through its table when it has one, and counts a signature that
// verified without one toward it.
func (c *keyCache) verify(k *cachedKey, d [32]byte, sigHex string) bool {
	if c == nil {
		return verifySignature(k.pub, d, sigHex)
	}
	sig, ok := decodeSignature(sigHex)
	return ok && c.tables.Verify(k.addr.Key, k.pub, &k.uses, d, sig)
}

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
