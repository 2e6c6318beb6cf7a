package snap

import (
	"errors"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"

	"github.com/snapnode/snapnode/identity"
)

// cachedKey is a decoded address and its lifted output key Q.
type cachedKey struct {
	addr identity.Address
	pub  *btcec.PublicKey
}

// keyCache remembers decoded addresses so that a known sender costs a map
// look-up instead of a bech32m decode and a field square root (lift_x is
// about a tenth of a Schnorr verification). It holds at most max entries and
// evicts an arbitrary one when full, so a flood of new addresses costs what
// no cache would and no more memory. A nil *keyCache decodes every time.
type keyCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*cachedKey
}

func newKeyCache(max int) *keyCache {
	return &keyCache{max: max, m: make(map[string]*cachedKey, min(max, 1024))}
}

// lookup decodes addr, which names the given envelope field, or fails with
// 2005 naming the broken rule.
func (c *keyCache) lookup(field, addr string) (*cachedKey, *Error) {
	if c != nil {
		c.mu.Lock()
		k := c.m[addr]
		c.mu.Unlock()
		if k != nil {
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
		c.mu.Lock()
		if len(c.m) >= c.max {
			for victim := range c.m {
				delete(c.m, victim)
				break
			}
		}
		c.m[addr] = k
		c.mu.Unlock()
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
