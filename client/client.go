package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/internal/textcut"
	"github.com/snapnode/snapnode/snap"
)

// Transport carries the requests of one requester to one agent. Send
// signs one request of method with payload, delivers it and returns the
// agent's answer once it has verified it: it validates (syntax, timestamp
// window, replay), its signature verifies against from, from is the agent
// asked, to is the requester, and it is a response of method. Stream does the same
// for a streaming method (message/stream, tasks/resubscribe): each event
// of that method that verifies likewise goes to onEvent as it arrives
// (nil: events are dropped), then the final response is returned; an
// error from onEvent ends the exchange and is returned. A SNAP error is a
// response too: snap.ResponseError finds it in the payload. Both wait until
// ctx ends at most.
//
// (*Nostr).To and (*HTTP).To return the two implementations.
type Transport interface {
	Send(ctx context.Context, method string, payload []byte) (*snap.Message, error)
	Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error)
}

// ErrInvalidResponse wraps every reason a received message was refused: it
// did not validate (the *snap.Error is wrapped too), was unsigned, came
// from another agent than the one asked, was addressed to someone else, or
// was of the wrong type or method.
var ErrInvalidResponse = errors.New("invalid response")

// requester is what every transport shares: the key that signs requests
// and the checks of what answers them, with one replay store for all the
// answers the requester receives.
type requester struct {
	key      *identity.Key
	now      func() time.Time
	maxDrift time.Duration
	replay   snap.ReplayStore
	checks   *answerChecks
	// tables, when not nil, holds the tables of the agents' keys: the
	// relay pool's (relay.Verifier.Tables), so that an agent's answers
	// and the events carrying them are checked through one table of its
	// Nostr key (snap.Config.Tables).
	tables *secp.Tables[[32]byte]
}

// answerChecks holds the Validators of the answers addressed to the
// requester's own addresses (one a network), made once: a Validator keeps
// caches (the agent's decoded address and output key, recent answers) that
// a Validator per exchange would build again at every request. The
// answers to a request signed beforehand by another key get a Validator
// of their own, so the map holds at most two.
type answerChecks struct {
	own  [2]string // the key's addresses, mainnet and testnet
	mu   sync.Mutex
	byTo map[string]*snap.Validator
}

// answerReplayCapacity bounds the answers a requester remembers (to refuse
// one replayed): about 3 MB; past it the oldest are forgotten.
const answerReplayCapacity = 10_000

func newRequester(key *identity.Key, now func() time.Time, maxDrift time.Duration, tables *secp.Tables[[32]byte]) requester {
	if now == nil {
		now = time.Now
	}
	checks := &answerChecks{byTo: make(map[string]*snap.Validator, 2)}
	if key != nil {
		checks.own = [2]string{key.Address(identity.Mainnet), key.Address(identity.Testnet)}
	}
	return requester{key: key, now: now, maxDrift: maxDrift, replay: snap.NewAnswerReplayStore(answerReplayCapacity), checks: checks, tables: tables}
}

// window returns the timestamp window of the answers: MaxDrift, or
// snap.DefaultMaxDrift when not set.
func (r *requester) window() time.Duration {
	if r.maxDrift > 0 {
		return r.maxDrift
	}
	return snap.DefaultMaxDrift
}

// validator returns the Validator of the answers addressed to self.
func (r *requester) validator(self string) *snap.Validator {
	newValidator := func() *snap.Validator {
		return snap.NewValidator(snap.Config{Self: self, Now: r.now, MaxDrift: r.maxDrift, Replay: r.replay, Tables: r.tables})
	}
	if self == "" || (self != r.checks.own[0] && self != r.checks.own[1]) {
		return newValidator()
	}
	r.checks.mu.Lock()
	defer r.checks.mu.Unlock()
	v, ok := r.checks.byTo[self]
	if !ok {
		v = newValidator()
		r.checks.byTo[self] = v
	}
	return v
}

// exchange is one signed request and the checks of what answers it.
type exchange struct {
	req  *snap.Message
	body []byte
	v    *snap.Validator
}

// prepare checks req, signs it with the requester's key when it is
// unsigned (filling id, version, type, from and timestamp when empty), and
// serializes it. The request must name its recipient: the answer is
// checked to come from it.
func (r *requester) prepare(req *snap.Message) (*exchange, error) {
	if req.To == "" {
		return nil, errors.New("client: the request has no to; the client checks that the answer comes from the agent addressed")
	}
	to, err := identity.ParseAddress(req.To)
	if err != nil {
		return nil, fmt.Errorf("client: to: %w", err)
	}
	if err := r.sign(req, to.Network); err != nil {
		return nil, err
	}
	if req.Type != snap.TypeRequest {
		return nil, fmt.Errorf("client: a %s is not a request", req.Type)
	}
	body, err := req.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &exchange{req: req, body: body, v: r.validator(req.From)}, nil
}

// sign signs req with the requester's key when it is unsigned, filling
// id, version, type, from (on network) and timestamp when empty.
func (r *requester) sign(req *snap.Message, network identity.Network) error {
	if req.Sig != "" {
		return nil
	}
	if r.key == nil {
		return errors.New("client: the request is unsigned and the client has no key")
	}
	if req.ID == "" {
		req.ID = snap.NewID()
	}
	if req.Version == "" {
		req.Version = snap.ProtocolVersion
	}
	if req.Type == "" {
		req.Type = snap.TypeRequest
	}
	if req.From == "" {
		req.From = r.key.Address(network)
	}
	if req.Timestamp == 0 {
		req.Timestamp = r.now().Unix()
	}
	return req.Sign(r.key)
}

// unechoable reports whether got is the error a server answers a request
// of a malformed method with (see snap.ValidMethod): of method
// "snap/error", since the request's cannot be echoed, and carrying an
// error.
func (x *exchange) unechoable(got *snap.Verified) bool {
	return got.Method == "snap/error" && !snap.ValidMethod(x.req.Method) && snap.ResponseError(got.Payload) != nil
}

// check verifies one received message raw. signer is the key the transport
// authenticated the sender with (a Nostr event's author, whose event also
// names the request), or nil; event
// reports whether an event of the request's method is acceptable here.
// Every refusal wraps ErrInvalidResponse.
func (x *exchange) check(ctx context.Context, raw []byte, signer *[32]byte, event bool) (*snap.Verified, error) {
	var (
		got *snap.Verified
		err error
	)
	if signer != nil {
		got, err = x.v.ValidateSigned(ctx, raw, *signer)
	} else {
		got, err = x.v.Validate(ctx, raw)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidResponse, err)
	}
	switch {
	case !got.Signed:
		return nil, fmt.Errorf("%w: unsigned %s", ErrInvalidResponse, got.Type)
	case got.From != x.req.To:
		return nil, fmt.Errorf("%w: from %s, not the agent addressed, %s", ErrInvalidResponse, got.From, x.req.To)
	case got.To == "" && signer != nil && got.Type == snap.TypeResponse && snap.ResponseError(got.Payload) != nil:
		// A refusal of a request the agent could not take (rate limit, a
		// full queue) is addressed to no one, of no method (snapnode's
		// say snap/error); over Nostr the reply's tags and author bind
		// it to this request.
	case got.To != x.req.From:
		return nil, fmt.Errorf("%w: addressed to %q, not to us (%s)%s", ErrInvalidResponse, got.To, x.req.From, errorHint(got.Payload))
	case got.Type == snap.TypeResponse && got.Method != x.req.Method && !x.unechoable(got):
		// A response echoes its request's method, an error's too. Over
		// HTTP and WebSocket nothing else binds it to the request: one
		// the agent signed for another of our requests, held back by a
		// proxy or gateway on the way, would otherwise pass for this
		// one's answer.
		return nil, fmt.Errorf("%w: a response of %s answered %s%s", ErrInvalidResponse, got.Method, x.req.Method, errorHint(got.Payload))
	case got.Type == snap.TypeResponse:
	case got.Type == snap.TypeEvent && event && got.Method == x.req.Method:
	case got.Type == snap.TypeEvent && event:
		return nil, fmt.Errorf("%w: an event of %s in a %s stream", ErrInvalidResponse, got.Method, x.req.Method)
	default:
		return nil, fmt.Errorf("%w: a %s answered %s", ErrInvalidResponse, got.Type, x.req.Method)
	}
	return got, nil
}

// errorHint names the SNAP error a refused response carried, if any, its
// message cut to maxHintText bytes: the agent chooses it, up to the
// transport's message size (megabytes over HTTP), and the error goes into
// its caller's log lines and errors.
func errorHint(payload []byte) string {
	if e := snap.ResponseError(payload); e != nil {
		return fmt.Sprintf("; it carried error %d: %s", int(e.Code), cutText(e.Message, maxHintText))
	}
	return ""
}

// maxHintText bounds the message of the SNAP error a refused response
// carried, as errorHint names it.
const maxHintText = 500

// cutText is s, as valid UTF-8, cut to at most n bytes and marked so.
func cutText(s string, n int) string {
	return textcut.Shorten(strings.ToValidUTF8(s, "\uFFFD"), n, "…")
}
