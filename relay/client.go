package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// Transport is what the inbox and the client need of relays. *Pool
// implements it: Subscribe delivers verified, deduplicated events matching
// f until the subscription is closed; Publish succeeds when at least one
// relay accepted the event.
type Transport interface {
	Subscribe(ctx context.Context, f nostr.Filter) (*Subscription, error)
	Publish(ctx context.Context, ev nostr.Event) (PublishResult, error)
}

// ErrTimeout is returned by Client.Request when no valid response arrived
// in time.
var ErrTimeout = errors.New("no valid response before the time-out")

// ResponseLookback is how far before sending a request the client listens
// for its response, as SDK peers do: a response's created_at may trail
// the request's by the responder's clock skew.
const ResponseLookback = 5 * time.Second

// Client sends SNAP requests over Nostr and verifies the responses as a
// requester must (SPEC-NOTES 4.4): the Nostr event, NIP-44, the SNAP
// signature against Q(from), from is the agent asked, to is us, type is
// response, the timestamp window and replay.
type Client struct {
	key       *identity.Key
	transport Transport
	sealer    *sealer
	logger    *slog.Logger
	now       func() time.Time
	maxDrift  time.Duration
	replay    snap.ReplayStore
}

// ClientConfig configures a Client.
type ClientConfig struct {
	Key       *identity.Key
	Transport Transport
	Logger    *slog.Logger
	Now       func() time.Time
	MaxDrift  time.Duration // timestamp window for responses; 0: 60 s
}

// NewClient returns a Client.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{
		key: cfg.Key, transport: cfg.Transport, sealer: newSealer(cfg.Key, 256),
		logger: cfg.Logger, now: cfg.Now, maxDrift: cfg.MaxDrift, replay: snap.NewMemoryReplayStore(10_000),
	}
}

// Target is an agent to message: its address and the Nostr key that
// publishes its card (found by discovery).
type Target struct {
	Address string
	PubKey  string
}

// Request is one SNAP request to send.
type Request struct {
	Method  string
	Payload []byte // a JSON object
	// Persist sends kind 4339, which relays store for an agent that is
	// offline, instead of the ephemeral 21339.
	Persist bool
}

// Response is a verified response and the event that carried it.
type Response struct {
	*snap.Verified
	Event *nostr.Event
}

// Request signs req, sends it to t and waits, until ctx ends, for the
// first response that passes every check. Replies that fail a check are
// logged as warnings and ignored, so a forger cannot pre-empt the answer;
// when none passes, the error says what was rejected. Stream events (a
// streaming method's) are skipped, as SDK peers skip them.
func (c *Client) Request(ctx context.Context, t Target, req Request) (*Response, error) {
	return c.exchange(ctx, t, req, nil)
}

// RequestStream is Request for a streaming method (message/stream,
// tasks/resubscribe): onEvent is called with each verified event (type
// "event", signed by t, to us, the request's method) as it arrives, then
// the final response is returned. Over several relays events may arrive
// out of order: the task version in their payloads orders them. An error
// from onEvent stops the wait and is returned.
func (c *Client) RequestStream(ctx context.Context, t Target, req Request, onEvent func(*Response) error) (*Response, error) {
	if onEvent == nil {
		onEvent = func(*Response) error { return nil }
	}
	return c.exchange(ctx, t, req, onEvent)
}

// exchange sends req and waits for its response; events go to onEvent, or
// are skipped when it is nil.
func (c *Client) exchange(ctx context.Context, t Target, req Request, onEvent func(*Response) error) (*Response, error) {
	to, err := identity.ParseAddress(t.Address)
	if err != nil {
		return nil, fmt.Errorf("relay: target: %w", err)
	}
	var tp [32]byte
	if _, err := decodeHex32(t.PubKey, &tp); err != nil {
		return nil, fmt.Errorf("relay: target pubkey: %w", err)
	}
	if q, err := identity.OutputKeyOf(tp); err != nil || q != to.Key {
		return nil, fmt.Errorf("relay: pubkey %s does not own %s", t.PubKey, t.Address)
	}
	self := c.key.Address(to.Network)
	now := c.now()
	m := &snap.Message{
		ID: snap.NewID(), Version: snap.ProtocolVersion, From: self, To: t.Address,
		Type: snap.TypeRequest, Method: req.Method, Payload: req.Payload, Timestamp: now.Unix(),
	}
	if err := m.Sign(c.key); err != nil {
		return nil, err
	}
	plain, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	kind := KindEphemeral
	if req.Persist {
		kind = KindMessage
	}
	content, err := c.sealer.seal(t.PubKey, plain)
	if err != nil {
		return nil, err
	}
	ev := nostr.Event{PubKey: c.key.NostrPublicKey(), CreatedAt: nostr.Timestamp(now.Unix()), Kind: kind,
		Tags: nostr.Tags{{"p", t.PubKey}}, Content: content}
	if err := signEvent(c.key, &ev, nil); err != nil {
		return nil, err
	}

	// Listen before publishing, as SDK peers do.
	since := nostr.Timestamp(now.Add(-ResponseLookback).Unix())
	sub, err := c.transport.Subscribe(ctx, nostr.Filter{
		Kinds: []int{KindEphemeral, KindMessage}, Since: &since,
		Tags: nostr.TagMap{"p": {c.key.NostrPublicKey()}, "e": {ev.ID}},
	})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	if _, err := c.transport.Publish(ctx, ev); err != nil {
		return nil, fmt.Errorf("relay: publish request: %w", err)
	}

	validator := snap.NewValidator(snap.Config{Self: self, Now: c.now, MaxDrift: c.maxDrift, Replay: c.replay})
	var rejected []error
	for {
		select {
		case <-ctx.Done():
			if len(rejected) > 0 {
				return nil, fmt.Errorf("relay: %w; rejected replies: %w", ErrTimeout, errors.Join(rejected...))
			}
			return nil, ErrTimeout
		case rev, ok := <-sub.Events():
			if !ok {
				return nil, fmt.Errorf("relay: subscription ended: %w", ErrTimeout)
			}
			resp, err := c.check(ctx, validator, t, ev.ID, req.Method, rev)
			if err != nil {
				c.logger.Warn("rejected a reply", "event", rev.ID, "from", rev.PubKey, "err", err)
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

// check verifies one reply event to the request event reqID: a response,
// or a stream event of the request's method.
func (c *Client) check(ctx context.Context, v *snap.Validator, t Target, reqID, method string, ev *nostr.Event) (*Response, error) {
	if !hasTag(ev, "e", reqID) || !hasTag(ev, "p", c.key.NostrPublicKey()) {
		return nil, fmt.Errorf("reply %s lacks the p or e tag", ev.ID)
	}
	if ev.PubKey != t.PubKey {
		return nil, fmt.Errorf("reply %s is signed by %s, not by the agent asked", ev.ID, ev.PubKey)
	}
	plain, err := c.sealer.open(ev.PubKey, ev.Content)
	if err != nil {
		return nil, err
	}
	var signer [32]byte
	decodeHex32(ev.PubKey, &signer)
	got, err := v.ValidateSigned(ctx, plain, signer)
	if err != nil {
		return nil, fmt.Errorf("reply %s: %w", ev.ID, err)
	}
	switch {
	case got.Type != snap.TypeResponse && got.Type != snap.TypeEvent:
		return nil, fmt.Errorf("reply %s is a %s, not a response", ev.ID, got.Type)
	case got.Type == snap.TypeEvent && got.Method != method:
		return nil, fmt.Errorf("reply %s is an event of %s, not of %s", ev.ID, got.Method, method)
	case !got.Signed:
		return nil, fmt.Errorf("reply %s is unsigned; over Nostr responses and events must be signed", ev.ID)
	case got.From != t.Address:
		return nil, fmt.Errorf("reply %s is from %s, not %s", ev.ID, got.From, t.Address)
	}
	return &Response{Verified: got, Event: ev}, nil
}

func hasTag(ev *nostr.Event, name, value string) bool {
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == name && tag[1] == value {
			return true
		}
	}
	return false
}
