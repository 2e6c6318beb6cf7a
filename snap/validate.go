package snap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/secp"
)

// DefaultMaxDrift is the spec's timestamp window: a message more than 60 s
// from the receiver's clock is rejected; exactly 60 s is accepted.
const DefaultMaxDrift = 60 * time.Second

// MinReplayRetention is how long the spec requires ids to be remembered.
const MinReplayRetention = 120 * time.Second

// Config configures a Validator. The zero value validates without a replay
// store and without a recipient check.
type Config struct {
	// Self is this agent's address. When set, a message whose to names
	// another agent is rejected (1004, field "to", constraint
	// "recipient"), and so is a request without to (constraint
	// "required") unless its method is service/call.
	Self string
	// MaxDrift is the timestamp window; 0 means DefaultMaxDrift.
	MaxDrift time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Replay remembers (from, id) pairs. nil disables the replay stage,
	// which only a stateless tool such as `snapnode verify` should do.
	Replay ReplayStore
	// KeyCacheSize bounds the cache of decoded sender addresses, and
	// that of transport signers' keys (ValidateSigned); 0 means 4096.
	KeyCacheSize int
	// Tables, when set, holds the tables of the senders' keys (each
	// earned by secp.PromoteAfter verified signatures) instead of a
	// Validator's own of 64 keys: pass the relay.Verifier's
	// (Verifier.Tables) that checks the Nostr events carrying these
	// messages, so that an agent's event key and its address share one
	// table and one place in its bound. A message of ValidateSigned is
	// checked through the table of its signer, the internal key whose
	// output key its from names, and counts with the event that carried
	// it as one request on the clock that decides which tables are idle
	// (secp.Tables.VerifyOutputAgain), as a message over HTTP does.
	Tables *secp.Tables[[32]byte]
	// Limiter, when set, decides whether an authenticated sender of a
	// request may be served now: it is asked with the address of from
	// after the signature verifies (so a forger cannot spend someone
	// else's allowance) and before the replay record (so a refused
	// message does not burn its id: the same message may be sent again).
	// A refusal is 5002 with data {"retryAfter": seconds}, and the limit
	// and its window when the Limiter states them (see RateLimited).
	Limiter Limiter
	// ClaimMethods are the methods whose handlers write a request's
	// replay record themselves, in their first durable write (a new
	// task and its record in one transaction): for a request a Server
	// serves, the Validator does not write the record but hands it to
	// the handler as Verified.Claim (see ReplayClaim). Name a method only
	// when its handler settles the claim before any effect, as the tasks
	// service's message/send does, or has none (the Server then writes
	// the record once the handler returned, see ReplayClaim); a stream
	// handler settles it before its first event, as the record is
	// otherwise written only when the stream ends. Validate and
	// ValidateSigned, which serve no handler, always write the record.
	ClaimMethods []string
}

// Limiter is a rate limit keyed by sender: Allow takes one unit of key's
// allowance, or reports how long until there is one. It must be safe for
// concurrent use (internal/ratelimit's Limiter is one).
type Limiter interface {
	Allow(key string) (ok bool, retryAfter time.Duration)
}

// Validator runs the whole validation of inbound SNAP messages, in the order
// of docs/conformance.md: syntax, structure, types, constraints, semantics (see
// Stage), then timestamp, signature, replay and recipient. The first failure
// wins and is returned as an *Error with its code and data, save a failure
// of the replay store itself, an internal fault returned as an error
// wrapping the store's. A Validator is safe for concurrent use.
type Validator struct {
	cfg       Config
	keys      *keyCache
	signers   *signerCache
	retention time.Duration
	// seen holds the replay records of the messages this process recorded
	// or found recorded, so that a byte-for-byte replay costs neither a
	// signature check nor a read of the replay store (on PostgreSQL, a
	// round trip per message). It is a cache: an evicted or never-seen
	// replay is verified and then caught by the store's Remember, which
	// is the one authority across restarts and replicas.
	// Its keys are seenKey's 64 bits, not the sender's address and the id.
	seen *bounded.Expiring[uint64, seenRecord]
	seed maphash.Seed // of seenKey and viaSum: random, this process's own
}

// seenRecord is what the Validator's cache keeps of a ReplayRecord: what
// tells a replay (the fingerprint's first half) and what its answer says
// (when it was first seen, and by which delivery); its expiry is the
// cache's. 32 bytes: a full cache holds about 1 MB (map slack and the
// expiry queue included).
//
// The cache is looked up by a 64-bit hash of (from, id), so two pairs can
// share a key; that is harmless because a message is rejected from the
// cache only when its fingerprint equals the one held, which a message
// of another pair cannot have (the fingerprint covers from and id). Half
// of SHA-256 keeps that true against anyone: finding two messages with
// equal halves takes 2⁶⁴ hashes, and would only get the finder's own
// message answered as the replay it is.
type seenRecord struct {
	firstSeen   int64 // Unix seconds
	fingerprint [16]byte
	via         uint64 // viaSum of the delivery
}

func (v *Validator) newSeenRecord(r ReplayRecord) seenRecord {
	return seenRecord{firstSeen: r.FirstSeen.Unix(), fingerprint: [16]byte(r.Fingerprint[:16]), via: v.viaSum(r.Via)}
}

// SeenCacheSize bounds the Validator's cache of recent replay records:
// 10 s of 800 valid requests a second. A replay older than that costs a
// signature check and a read of the replay store, never a wrong answer.
const SeenCacheSize = 8192

// NewValidator returns a Validator for cfg.
func NewValidator(cfg Config) *Validator {
	if cfg.MaxDrift <= 0 {
		cfg.MaxDrift = DefaultMaxDrift
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeyCacheSize <= 0 {
		cfg.KeyCacheSize = 4096
	}
	return &Validator{
		cfg:       cfg,
		keys:      newKeyCache(cfg.KeyCacheSize, cfg.Tables),
		signers:   newSignerCache(cfg.KeyCacheSize),
		retention: retention(cfg.MaxDrift),
		seen:      bounded.NewExpiring[uint64, seenRecord](SeenCacheSize, true),
		seed:      maphash.MakeSeed(),
	}
}

// retention is how long a message's replay record is kept under the
// window drift: a message is acceptable while |now − timestamp| ≤ drift,
// so over a span of 2·drift (and the second's fraction its timestamp
// leaves out); keep its id at least that long, and at least the spec's
// 120 s. A window of more than 146 years, where 2·drift + 1 s passes
// time.Duration's range, keeps it for that range (292 years) rather than
// wrap around to a retention of 120 s.
func retention(drift time.Duration) time.Duration {
	if drift > (math.MaxInt64-time.Second)/2 {
		return math.MaxInt64
	}
	return max(MinReplayRetention, 2*drift+time.Second)
}

// Retention is how long the Validator keeps a message's replay record
// (and a ResultStore its result): at least 2·MaxDrift and
// MinReplayRetention.
func (v *Validator) Retention() time.Duration { return v.retention }

// Verified is a message that passed validation.
type Verified struct {
	*Message
	// Signed reports that the message carried a signature and it
	// verified. Requests are always signed; responses and events may not
	// be, and an unsigned one proves nothing about its sender.
	Signed bool
	// Sender is the decoded from address.
	Sender identity.Address
	// Digest is SHA-256 of the signature input.
	Digest [32]byte
	// Claim, when not nil, is the request's replay record, not written
	// yet: its handler writes it (Config.ClaimMethods, ReplayClaim).
	Claim *ReplayClaim
	// recorded is when validation wrote the replay record of a request
	// (Config.Replay), spending its id before any handler ran; zero
	// when it wrote none (no replay store, or Claim).
	recorded time.Time
}

// Validate validates raw, a serialized SNAP message.
func (v *Validator) Validate(ctx context.Context, raw []byte) (*Verified, error) {
	out, _, err := v.validate(ctx, raw, nil, "", false)
	return out, err
}

// ValidateSigned validates raw, a message whose transport authenticated its
// sender with the x-only key signer, as a Nostr event's pubkey does: from
// must be the P2TR address of signer on either network, else 2003
// IdentityMismatch. The check follows the semantics stage.
func (v *Validator) ValidateSigned(ctx context.Context, raw []byte, signer [32]byte) (*Verified, error) {
	out, _, err := v.validate(ctx, raw, &signer, "", false)
	return out, err
}

// validate is Validate; it also returns the envelope when the syntax stage
// passed, so that a server can address its error response. via names the
// delivery that carried raw (see Inbound.Via), or is empty. claim lets a
// request of Config.ClaimMethods leave its replay record to its handler.
func (v *Validator) validate(ctx context.Context, raw []byte, signer *[32]byte, via string, claim bool) (*Verified, *envelope, error) {
	env, e := readEnvelope(raw)
	if e != nil {
		return nil, nil, e
	}
	out, err := v.authenticate(ctx, env, signer, via, claim)
	return out, env, err
}

func (v *Validator) authenticate(ctx context.Context, env *envelope, signer *[32]byte, via string, claim bool) (*Verified, error) {
	m, from, err := parseEnvelope(env, StageSemantics, v.keys)
	if err != nil {
		return nil, err
	}
	var by *signerKey
	if signer != nil {
		s, err := v.signers.of(*signer)
		if err != nil || s.out.Bytes() != from.addr.Key {
			return nil, &Error{Code: CodeIdentityMismatch, Message: "from is not the address of the transport's signing key",
				Data: map[string]any{"from": m.From, "signer": hex.EncodeToString(signer[:])}}
		}
		by = s
	}
	now := v.cfg.Now()

	// Timestamp.
	drift := now.Unix() - m.Timestamp
	if drift < 0 {
		drift = -drift
	}
	if maxDrift := int64(v.cfg.MaxDrift / time.Second); drift > maxDrift {
		return nil, &Error{
			Code:    CodeTimestampExpired,
			Message: fmt.Sprintf("timestamp is %d s from the server's clock; at most %d s allowed", drift, maxDrift),
			Data:    map[string]any{"provided": m.Timestamp, "serverTime": now.Unix(), "maxDrift": maxDrift},
		}
	}

	out := &Verified{Message: m, Sender: from.addr, Digest: digest(m, m.Payload)}

	// Signature.
	if m.Sig == "" {
		if m.Type == TypeRequest {
			return nil, &Error{Code: CodeSignatureMissing, Message: "a request must be signed",
				Data: map[string]any{"field": "sig", "required": true}}
		}
		// An unsigned response or event: accepted as unauthenticated,
		// and never recorded, so it cannot burn its sender's ids.
		return out, v.checkRecipient(m)
	}
	fp := fingerprint(out.Digest, m.Sig)
	key := v.seenKey(m.From, m.ID)
	if prior, ok := v.seen.Get(key, now); ok && prior.fingerprint == [16]byte(fp[:16]) {
		// A byte-for-byte replay of a message this process authenticated
		// (or found recorded) is rejected without a second verification
		// and without asking the replay store. Anything else that reuses
		// the pair must verify first, so a forger learns nothing.
		return nil, v.duplicate(m, prior, via)
	}
	verified := false
	if by != nil {
		verified = v.keys.verifyBy(by, out.Digest, m.Sig)
	} else {
		verified = v.keys.verify(from, out.Digest, m.Sig)
	}
	if !verified {
		return nil, &Error{Code: CodeSignatureInvalid, Message: "signature does not verify against the key of from",
			Data: map[string]any{"field": "sig", "reason": "BIP-340 verification failed for the output key of " + m.From}}
	}
	out.Signed = true

	// Rate.
	if v.cfg.Limiter != nil && m.Type == TypeRequest {
		if ok, wait := v.cfg.Limiter.Allow(m.From); !ok {
			return nil, RateLimited(wait, "identity", v.cfg.Limiter)
		}
	}

	// Replay.
	if v.cfg.Replay != nil {
		rec := ReplayRecord{FirstSeen: now, Expires: now.Add(v.retention), Fingerprint: fp, Via: via}
		if claim && m.Type == TypeRequest && v.claims(m.Method) {
			// A request refused here burns its id as any other does:
			// its record is written first, so that a replay of it is
			// answered as one. An accepted one leaves its record to its
			// handler, which writes it with its effect.
			if err := v.checkRecipient(m); err != nil {
				if rerr := v.remember(ctx, m, key, rec, now); rerr != nil {
					return nil, rerr
				}
				return nil, err
			}
			out.Claim = v.newClaim(m, key, rec)
			return out, nil
		}
		if err := v.remember(ctx, m, key, rec, now); err != nil {
			return nil, err
		}
		if m.Type == TypeRequest {
			out.recorded = now
		}
	}

	// Recipient.
	if err := v.checkRecipient(m); err != nil {
		return nil, err
	}
	return out, nil
}

// remember writes m's replay record rec in the replay store, and returns
// the error that refuses m when it is not fresh or the store failed.
func (v *Validator) remember(ctx context.Context, m *Message, key uint64, rec ReplayRecord, now time.Time) error {
	prior, fresh, err := v.cfg.Replay.Remember(ctx, m.From, m.ID, rec)
	if err != nil {
		return v.storeError(err)
	}
	return v.remembered(m, key, rec, prior, fresh, now)
}

// storeError is the error that refuses a message whose replay record
// could not be written: 5003 when the store is full, else an internal
// fault, not the sender's: its text (a database's address, say) is for
// the operator's log, and a Server answers it with 5001 alone.
func (v *Validator) storeError(err error) error {
	if errors.Is(err, ErrReplayStoreFull) {
		return &Error{Code: CodeServiceUnavailable, Message: "too many recent messages; try again shortly",
			Data: map[string]any{"reason": "replay store full", "retryAfter": int64(v.retention / time.Second)}}
	}
	return fmt.Errorf("snap: replay store: %w", err)
}

// remembered caches the outcome of writing m's record rec: when fresh,
// rec, and nil is returned; else prior, the record that stopped it (when
// it is of the same message), and the duplicate's error is returned.
func (v *Validator) remembered(m *Message, key uint64, rec ReplayRecord, prior ReplayRecord, fresh bool, now time.Time) error {
	if !fresh {
		if prior.Fingerprint == rec.Fingerprint {
			v.seen.Add(key, v.newSeenRecord(prior), prior.Expires, now)
		}
		return v.duplicate(m, v.newSeenRecord(prior), rec.Via)
	}
	v.seen.Add(key, v.newSeenRecord(rec), rec.Expires, now)
	return nil
}

// checkRecipient rejects a message addressed to another agent, and a
// request that names no recipient unless it is a service/call: a signed
// request without to could be replayed to any other agent within the
// timestamp window, since replay records are per receiver (the SNAP
// specification does not address this; docs/conformance.md records the
// choice). It returns a nil error, not a nil *Error, on success.
func (v *Validator) checkRecipient(m *Message) error {
	switch {
	case v.cfg.Self == "":
	case m.To == "":
		if m.Type == TypeRequest && m.Method != MethodServiceCall {
			return FieldError("to", "required", v.cfg.Self, nil)
		}
	case m.To != v.cfg.Self:
		return FieldError("to", "recipient", v.cfg.Self, m.To)
	}
	return nil
}

func fingerprint(d [32]byte, sigHex string) [32]byte {
	var raw [64]byte
	hex.Decode(raw[:], []byte(sigHex))
	h := sha256.New()
	h.Write(d[:])
	h.Write(raw[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// seenKey names the pair (from, id) in the Validator's cache: a 64-bit
// hash under the Validator's random seed (see seenRecord for why pairs
// that share one are harmless).
func (v *Validator) seenKey(from, id string) uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	h.WriteString(from)
	h.WriteByte(0)
	h.WriteString(id)
	return h.Sum64()
}

// viaSum names a delivery in the Validator's cache: 0 for none (""), else
// a hash under the Validator's seed, odd so that it is never 0. Two
// deliveries sharing a sum would have a replay dropped silently rather
// than answered 2006; with 63 random bits that is not a concern.
func (v *Validator) viaSum(via string) uint64 {
	if via == "" {
		return 0
	}
	return maphash.String(v.seed, via) | 1
}

// duplicate is the error for a message whose (from, id) was recorded by
// prior: ErrRedelivered when the same delivery carried both, else 2006.
func (v *Validator) duplicate(m *Message, prior seenRecord, via string) error {
	if via != "" && prior.via == v.viaSum(via) {
		return ErrRedelivered
	}
	return duplicateError(m.ID, prior.firstSeen)
}

// duplicateError is 2006 for the message id, first seen at firstSeen
// (Unix seconds).
func duplicateError(id string, firstSeen int64) *Error {
	return &Error{
		Code:    CodeDuplicateMessage,
		Message: "message id already seen from this sender",
		Data:    map[string]any{"id": id, "firstSeen": firstSeen},
	}
}
