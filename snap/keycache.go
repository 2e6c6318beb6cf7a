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
	tables *secp.Tables[[32]byte] // by x-only key: Q, or P for a signer
	// shared: tables are the relay's (Config.Tables), which verified a
	// signer's event through P's table before its message is checked.
	shared bool
}

// precomputedKeys bounds the senders of a Validator holding a table of
// their key, when it keeps its own tables (Config.Tables nil):
// secp.PrecomputedBytes each, 2.7 MB for the 64 in the pure-Go build. Each table is earned by secp.PromoteAfter signatures that
// verified under its key, and once all are held a Validator replaces one
// at most once per secp.ReplaceEvery verifications, so a flood of valid
// messages from fresh keys raises its verification CPU by at most about
// 10 %; a busy sender's table is not given up to another, and a sender
// with steady traffic still earns one under such a flood (secp.Tables).
const precomputedKeys = 64

// newKeyCache returns a keyCache of max addresses keeping its tables in
// tables, or in its own of precomputedKeys keys when tables is nil.
func newKeyCache(max int, tables *secp.Tables[[32]byte]) *keyCache {
	shared := tables != nil
	if !shared {
		tables = secp.NewTables[[32]byte](precomputedKeys)
	}
	return &keyCache{c: bounded.NewCache[string, *cachedKey](max), tables: tables, shared: shared}
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

// verifyBy is verify for a message whose transport's signer s, the
// internal key of k, signed the transport's envelope: the signature by
// k's output key is checked through s's table, where s's events are
// checked too when the tables are shared (Config.Tables), and counts
// toward it. In shared tables the envelope's check moved the clock of
// idleness for the request already, and the message's does not
// (secp.Tables.VerifyOutputAgain).
func (c *keyCache) verifyBy(s *signerKey, d [32]byte, sigHex string) bool {
	sig, ok := decodeSignature(sigHex)
	p := s.out.Internal()
	switch {
	case c == nil:
		return ok && p.VerifyOutput(s.out, d, sig)
	case c.shared:
		return ok && c.tables.VerifyOutputAgain(p.Bytes(), p, &s.uses, s.out, d, sig)
	}
	return ok && c.tables.VerifyOutput(p.Bytes(), p, &s.uses, s.out, d, sig)
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

// signerKey is the output key Q, which signs messages, of an internal
// key P that signs events (a Nostr pubkey), both lifted (out.Internal()
// is P), and the count of Q's signatures verified toward P's table.
type signerKey struct {
	out  *secp.OutputKey
	uses secp.Uses
}

// signerCache maps internal keys P to their signerKey: what computing Q
// costs (a lift and a scalar multiplication) is paid once per key. An
// entry takes under 300 bytes (TestSignerCacheSize): 1.1 MB for 4096
// keys.
type signerCache struct {
	c *bounded.Cache[[32]byte, *signerKey]
}

func newSignerCache(max int) *signerCache {
	return &signerCache{bounded.NewCache[[32]byte, *signerKey](max)}
}

func (c *signerCache) of(p [32]byte) (*signerKey, error) {
	if s, ok := c.c.Get(p); ok {
		return s, nil
	}
	pub, err := secp.ParsePublicKey(p)
	if err != nil {
		return nil, err
	}
	out, err := pub.TaprootOutput()
	if err != nil {
		return nil, err
	}
	s := &signerKey{out: out}
	c.c.Put(p, s)
	return s, nil
}
