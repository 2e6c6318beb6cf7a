package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/lowerhex"
	"github.com/snapnode/snapnode/internal/secp"
)

// Verifier checks Nostr events (NIP-01 id and BIP-340 signature) and
// remembers, in bounded caches, the authors' lifted keys and the events it
// has verified or that this process signed. One Verifier shared by the
// embedded relay, the pool and the inbox checks each event's signature
// once per process: an event seen again costs the hash of its
// serialization, which is recomputed every time, so a cached signature
// only ever vouches for the exact event it was checked on.
// An author whose key verifies secp.PromoteAfter events earns a table
// of its key's multiples that makes its next verifications about twice
// as fast (secp.Tables); at most PrecomputedKeys authors hold one.
// A Verifier is safe for concurrent use.
type Verifier struct {
	keys   *bounded.Cache[string, *author]
	tables *secp.Tables[[32]byte]             // by x-only key
	seen   *bounded.Cache[[32]byte, struct{}] // vouched(id, signature) of the events verified or signed
	checks atomic.Uint64                      // signatures checked (SignatureChecks)
}

// vouched is what a Verifier's cache keeps of an event it verified or
// signed: the SHA-256 of its id and signature. A cached digest vouches
// for the event whose id and signature hash to it, and for no other
// unless SHA-256 has a collision, the assumption event ids already rest
// on. It is 32 bytes where the id and the signature are 96: 82 bytes an
// event in the cache at its bound instead of 210.
func vouched(id [32]byte, sig [64]byte) [32]byte {
	var b [96]byte
	copy(b[:32], id[:])
	copy(b[32:], sig[:])
	return sha256.Sum256(b[:])
}

// author is an event author's lifted key and the count of its events
// verified, toward its table.
type author struct {
	pub  *secp.PublicKey
	uses secp.Uses
}

// PrecomputedKeys bounds the authors of a Verifier that hold a table of
// their key (secp.PrecomputedBytes each: 2.7 MB for the 64 in the pure-Go
// build). Each table is earned by secp.PromoteAfter events that verified
// under its key, and once all are held a Verifier replaces one at most
// once per secp.ReplaceEvery verifications, so a flood of valid events
// from fresh keys raises its verification CPU by at most about 10 %; a
// busy author's table is not given up to another, and an author with
// steady traffic still earns one under such a flood (secp.Tables). A
// node shares these tables with its snap.Validator (Tables), so the bound
// covers its peers' event keys and the addresses of its HTTP senders
// together; a Nostr peer's messages verify through its event key's table,
// and its event and message count as one request toward the idleness that
// lets a table give way, as an HTTP sender's message does.
const PrecomputedKeys = 64

// VerifiedEvents bounds a Verifier's cache of events verified or signed
// (a 32-byte digest an event, and the map's slack). An event is remembered only
// for its next check: from the embedded relay, which checks it when it is
// published, to the pool, which checks it when it is delivered, or from
// this process's signature to the relay. That is milliseconds, seconds at
// worst under load: 4,096 events are 2.7 s of a flood of 1,500 events a
// second. An event forgotten sooner costs one more signature check, never
// a wrong answer.
const VerifiedEvents = 4096

// NewVerifier returns a Verifier remembering up to 4,096 authors and
// VerifiedEvents events.
func NewVerifier() *Verifier {
	return &Verifier{
		keys:   bounded.NewCache[string, *author](4096),
		tables: secp.NewTables[[32]byte](PrecomputedKeys),
		seen:   bounded.NewCache[[32]byte, struct{}](VerifiedEvents),
	}
}

// Verify returns an error wrapping ErrInvalidEvent unless ev's id is the
// hash of its content and its signature is valid for its pubkey.
func (v *Verifier) Verify(ev *nostr.Event) error {
	id, err := CheckID(ev)
	if err != nil {
		return err
	}
	var raw [64]byte
	if !lowerhex.Valid(ev.Sig, 128) {
		return fmt.Errorf("%w: %s: signature is not 128 lower-case hex characters", ErrInvalidEvent, ev.ID)
	}
	if _, err := hex.Decode(raw[:], []byte(ev.Sig)); err != nil {
		return fmt.Errorf("%w: %s: signature: %w", ErrInvalidEvent, ev.ID, err)
	}
	key := vouched(id, raw)
	if _, ok := v.seen.Get(key); ok {
		return nil
	}
	a, ok := v.keys.Get(ev.PubKey)
	if !ok {
		var p [32]byte
		if _, err := decodeHex32(ev.PubKey, &p); err != nil {
			return fmt.Errorf("%w: pubkey: %w", ErrInvalidEvent, err)
		}
		pub, err := secp.ParsePublicKey(p)
		if err != nil {
			return fmt.Errorf("%w: pubkey is not a point on secp256k1", ErrInvalidEvent)
		}
		a = &author{pub: pub}
		v.keys.Put(ev.PubKey, a)
	}
	v.checks.Add(1)
	if !v.tables.Verify(a.pub.Bytes(), a.pub, &a.uses, id, raw) {
		return fmt.Errorf("%w: %s: bad signature", ErrInvalidEvent, ev.ID)
	}
	v.seen.Put(key, struct{}{})
	return nil
}

// Tables returns the tables of v's authors' keys, keyed by x-only key, to
// share with the snap.Validator of the messages these authors send
// (snap.Config.Tables): an agent's messages over Nostr are signed by the
// output key of the key that signs its events, which verifies them
// through the same table (secp.Tables.VerifyOutput), so that the agent
// holds one table and one place in PrecomputedKeys instead of two.
func (v *Verifier) Tables() *secp.Tables[[32]byte] { return v.tables }

// SignatureChecks returns how many signatures v has checked: the events
// it verified, or refused for their signature, without knowing them
// already (signed through it, or verified before). Tests and benchmarks
// read it to count the signature checks an exchange costs.
func (v *Verifier) SignatureChecks() uint64 { return v.checks.Load() }

// checkID returns ev's id after checking it is the hash of its content.
func CheckID(ev *nostr.Event) ([32]byte, error) {
	var id [32]byte
	if _, err := decodeHex32(ev.ID, &id); err != nil {
		return id, fmt.Errorf("%w: id is not 64 hex characters", ErrInvalidEvent)
	}
	if EventID(ev) != id {
		return id, fmt.Errorf("%w: id %s does not match the content", ErrInvalidEvent, ev.ID)
	}
	return id, nil
}

// VerifyEvent checks one event with a throwaway Verifier.
func VerifyEvent(ev *nostr.Event) error { return NewVerifier().Verify(ev) }
