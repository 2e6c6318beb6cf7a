package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// ErrTimeout is returned by Nostr.Request when no valid response arrived
// in time.
var ErrTimeout = errors.New("no valid response before the time-out")

// Nostr sends SNAP requests over Nostr relays, sealed with NIP-44 to the
// agent's Nostr key, and verifies the replies as a requester must: the
// Nostr event (its id and signature, checked by the relay pool), its p and
// e tags, its author is the agent asked, its NIP-40 expiration (when it
// has one) has not passed by Now, NIP-44, then the checks every
// transport shares (see Transport). It is safe for concurrent use.
type Nostr struct {
	requester
	relays   snapnostr.Transport
	sealer   *snapnostr.Sealer
	verifier *relay.Verifier
	// owners remembers, for each agent's Nostr key checked, the P2TR
	// output key it owns: the tweak is a point multiplication, about a
	// tenth of a request's CPU, and the same for every request to an
	// agent. A target's address is compared with it on every request.
	owners *bounded.Cache[[32]byte, [32]byte]
	logger *slog.Logger
	// rejected bounds the lines of rejected replies: anyone who sees a
	// request's event id can publish replies to it, as many as they like.
	rejected logcap.Limiter
}

// NostrConfig configures a Nostr client.
type NostrConfig struct {
	// Key signs the requests and their Nostr events.
	Key *identity.Key
	// Relays carries the events: a *relay.Pool.
	Relays snapnostr.Transport
	// Verifier is the one Relays checks events with
	// (relay.PoolConfig.Verifier): the requests' events are signed through
	// it, so that publishing them costs no second check of a signature
	// just made, and the answers are checked through its tables of keys,
	// so that an agent's events and its answers earn one table of its
	// Nostr key, not one each. Nil: the events are signed alone, and
	// checked when published, and the answers' checks keep tables of
	// their own.
	Verifier *relay.Verifier
	Logger   *slog.Logger
	Now      func() time.Time
	MaxDrift time.Duration // timestamp window for responses; 0: 60 s
}

// NewNostr returns a Nostr client.
func NewNostr(cfg NostrConfig) *Nostr {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var tables *secp.Tables[[32]byte]
	if cfg.Verifier != nil {
		tables = cfg.Verifier.Tables()
	}
	return &Nostr{
		requester: newRequester(cfg.Key, cfg.Now, cfg.MaxDrift, tables),
		relays:    cfg.Relays, sealer: snapnostr.NewSealer(cfg.Key, maxAgents), verifier: cfg.Verifier,
		owners: bounded.NewCache[[32]byte, [32]byte](maxAgents), logger: cfg.Logger,
	}
}

// maxAgents bounds the agents whose NIP-44 keys and P2TR output keys a
// Nostr client remembers; one past it costs those computations again.
const maxAgents = 256

// owns reports whether the Nostr key pub owns the P2TR output key addr.
func (c *Nostr) owns(pub, addr [32]byte) bool {
	q, ok := c.owners.Get(pub)
	if !ok {
		var err error
		if q, err = identity.OutputKeyOf(pub); err != nil {
			return false
		}
		c.owners.Put(pub, q)
	}
	return q == addr
}

// Target is an agent to message: its address and the Nostr key that
// publishes its card (found by discovery).
type Target struct {
	Address string
	PubKey  string
	// Card is the agent's card it was found by (Relays.FindAgent), nil
	// when the target was given.
	Card *snap.Card
}

// NostrRequest is one SNAP request to send over Nostr.
type NostrRequest struct {
	Method  string
	Payload []byte // a JSON object
	// Persist sends kind 4339, which relays store for an agent that is
	// offline, instead of the ephemeral 21339.
	Persist bool
}

// NostrResponse is a verified response and the event that carried it.
type NostrResponse struct {
	*snap.Verified
	Event *nostr.Event
}

// To returns the Transport to the agent t; persist sends its requests as
// stored events (kind 4339).
func (c *Nostr) To(t Target, persist bool) Transport {
	return nostrAgent{c: c, t: t, persist: persist}
}

type nostrAgent struct {
	c       *Nostr
	t       Target
	persist bool
}

func (a nostrAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	resp, err := a.c.Request(ctx, a.t, NostrRequest{Method: method, Payload: payload, Persist: a.persist})
	if err != nil {
		return nil, err
	}
	return resp.Message, nil
}

func (a nostrAgent) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	if onEvent == nil {
		onEvent = func(*snap.Message) error { return nil }
	}
	resp, err := a.c.RequestStream(ctx, a.t, NostrRequest{Method: method, Payload: payload, Persist: a.persist},
		func(ev *NostrResponse) error { return onEvent(ev.Message) })
	if err != nil {
		return nil, err
	}
	return resp.Message, nil
}

// Request signs req, sends it to t and waits, until ctx ends, for the
// first response that passes every check. Replies that fail a check are
// logged as warnings and ignored, so a forger cannot pre-empt the answer;
// when none passes, the error says what was rejected. Stream events (a
// streaming method's) are skipped, as SDK peers skip them.
func (c *Nostr) Request(ctx context.Context, t Target, req NostrRequest) (*NostrResponse, error) {
	return c.exchange(ctx, t, req, nil)
}

// RequestStream is Request for a streaming method (message/stream,
// tasks/resubscribe): onEvent is called with each verified event (type
// "event", signed by t, to us, the request's method) as it arrives, then
// the final response is returned. Over several relays events may arrive
// out of order: the task version in their payloads orders them. An error
// from onEvent stops the wait and is returned. The events onEvent has not
// yet taken wait in the relay pool's subscription buffer (1,024 events and
// 4 MiB, relay.PoolConfig): an onEvent slower than the relays past it for
// a second ends the wait with an error rather than skip an event, since a
// stream missing one would mislead.
func (c *Nostr) RequestStream(ctx context.Context, t Target, req NostrRequest, onEvent func(*NostrResponse) error) (*NostrResponse, error) {
	if onEvent == nil {
		onEvent = func(*NostrResponse) error { return nil }
	}
	return c.exchange(ctx, t, req, onEvent)
}

// exchange sends req and waits for its response; events go to onEvent, or
// are skipped when it is nil.
func (c *Nostr) exchange(ctx context.Context, t Target, req NostrRequest, onEvent func(*NostrResponse) error) (*NostrResponse, error) {
	to, err := identity.ParseAddress(t.Address)
	if err != nil {
		return nil, fmt.Errorf("client: target: %w", err)
	}
	tp, err := decodeHex32(t.PubKey)
	if err != nil {
		return nil, fmt.Errorf("client: target pubkey: %w", err)
	}
	if !c.owns(tp, to.Key) {
		return nil, fmt.Errorf("client: pubkey %s does not own %s", t.PubKey, t.Address)
	}
	now := c.now()
	x, err := c.prepare(&snap.Message{To: t.Address, Method: req.Method, Payload: req.Payload, Timestamp: now.Unix()})
	if err != nil {
		return nil, err
	}
	kind := relay.KindEphemeral
	if req.Persist {
		kind = relay.KindMessage
	}
	content, err := c.sealer.Seal(t.PubKey, x.body)
	if err != nil {
		return nil, err
	}
	ev := nostr.Event{CreatedAt: nostr.Timestamp(now.Unix()), Kind: kind, Tags: nostr.Tags{{"p", t.PubKey}}, Content: content}
	if err := c.verifier.Sign(c.key, &ev); err != nil {
		return nil, err
	}

	// Listen before publishing, as SDK peers do, and back as far as the
	// timestamp window reaches: an agent whose clock is behind ours by
	// less than the window takes the request and dates its reply before
	// it (SDK peers listen 5 s back and miss such a reply). The filter
	// names the request's event, which no earlier event can, so listening
	// further back costs the relay nothing.
	since := nostr.Timestamp(now.Add(-c.window()).Unix())
	sub, err := c.relays.Subscribe(ctx, nostr.Filter{
		Kinds: []int{relay.KindEphemeral, relay.KindMessage}, Since: &since,
		Tags: nostr.TagMap{"p": {c.key.NostrPublicKey()}, "e": {ev.ID}},
	})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	if _, err := c.relays.Publish(ctx, ev); err != nil {
		return nil, fmt.Errorf("client: publish request: %w", err)
	}

	var rejected []error
	for {
		select {
		case <-ctx.Done():
			if len(rejected) > 0 {
				return nil, fmt.Errorf("client: %w; rejected replies: %w", ErrTimeout, errors.Join(rejected...))
			}
			return nil, ErrTimeout
		case rev, ok := <-sub.Events():
			if !ok {
				return nil, fmt.Errorf("client: subscription ended: %w", ErrTimeout)
			}
			resp, err := c.check(ctx, x, t, ev.ID, rev)
			if err != nil {
				c.rejected.Log(ctx, c.logger, c.now(), slog.LevelWarn, "rejected a reply", "event", rev.ID, "from", rev.PubKey, "err", err)
				if len(rejected) < maxRejected {
					rejected = append(rejected, err)
				}
				continue
			}
			if resp.Type == snap.TypeResponse {
				return resp, nil
			}
			if onEvent == nil {
				c.logger.Debug("skipped a stream event", "event", rev.ID, "method", resp.Method)
				continue
			}
			if err := onEvent(resp); err != nil {
				return nil, err
			}
		}
	}
}

// maxRejected bounds the rejected replies an error reports.
const maxRejected = 16

// check verifies one reply event to the request event reqID: what only
// Nostr carries (tags, author, a NIP-40 expiration not yet passed,
// NIP-44), then the exchange's checks.
func (c *Nostr) check(ctx context.Context, x *exchange, t Target, reqID string, ev *nostr.Event) (*NostrResponse, error) {
	if !ev.Tags.ContainsAny("e", []string{reqID}) || !ev.Tags.ContainsAny("p", []string{c.key.NostrPublicKey()}) {
		return nil, fmt.Errorf("reply %s lacks the p or e tag", ev.ID)
	}
	if ev.PubKey != t.PubKey {
		return nil, fmt.Errorf("reply %s is signed by %s, not by the agent asked", ev.ID, ev.PubKey)
	}
	if exp, ok := snapnostr.Expiration(ev); ok && int64(exp) <= c.now().Unix() {
		// NIP-40: clients SHOULD ignore an expired event; a relay that
		// does not drop them may deliver one.
		return nil, fmt.Errorf("reply %s expired (NIP-40) at %s", ev.ID, exp.Time().UTC().Format(time.RFC3339))
	}
	plain, err := c.sealer.Open(ev.PubKey, ev.Content)
	if err != nil {
		return nil, err
	}
	signer, err := decodeHex32(ev.PubKey)
	if err != nil {
		return nil, fmt.Errorf("reply %s: pubkey: %w", ev.ID, err)
	}
	got, err := x.check(ctx, plain, &signer, true)
	if err != nil {
		return nil, fmt.Errorf("reply %s: %w", ev.ID, err)
	}
	return &NostrResponse{Verified: got, Event: ev}, nil
}

// decodeHex32 decodes 64 lower-case hex characters, the form of Nostr
// keys (relay.DecodeHex32).
func decodeHex32(s string) ([32]byte, error) {
	var out [32]byte
	_, err := relay.DecodeHex32(s, &out)
	return out, err
}
