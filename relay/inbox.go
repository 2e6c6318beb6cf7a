package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/snap"
)

// Responder answers SNAP messages; *snap.Server implements it. Respond
// returns nil for a message that must not be answered.
type Responder interface {
	Respond(ctx context.Context, in snap.Inbound) *snap.Message
	Refuse(err *snap.Error) *snap.Message
}

// InboxConfig configures an Inbox.
type InboxConfig struct {
	Key        *identity.Key
	Transport  Transport
	Responder  Responder
	Checkpoint Checkpoint // nil: no catch-up of stored requests
	// Verifier, shared with the transport, learns of the replies the
	// inbox signs so that publishing them costs no second verification.
	Verifier *Verifier
	Logger   *slog.Logger
	Now      func() time.Time
	// Workers handle requests concurrently (default 8); Queue bounds the
	// requests waiting for one (default 256). When the queue is full a
	// request is refused at once with 5003, never left to time out.
	Workers, Queue int
	// ReplyTTL is the NIP-40 expiration of replies to stored requests
	// (default 7 days).
	ReplyTTL time.Duration
	// Lookback is how far before the checkpoint (or before now, on a first
	// start) the subscription begins (default 2 minutes).
	Lookback time.Duration
}

// Inbox is the node's receiving side on Nostr: it subscribes to SNAP
// messages addressed to its key (kinds 21339 and 4339), opens them
// (NIP-44, conversation keys cached per peer), has the Responder validate
// and answer them with the event's author as the bound signer, and
// publishes each answer as the same kind with tags p (requester) and e
// (request), plus a NIP-40 expiration on stored kinds.
type Inbox struct {
	cfg       InboxConfig
	sealer    *sealer
	recent    *bounded.Cache[string, struct{}] // event ids already queued
	ready     chan struct{}
	readyOnce sync.Once
}

// NewInbox returns an Inbox for cfg.
func NewInbox(cfg InboxConfig) *Inbox {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 256
	}
	if cfg.ReplyTTL <= 0 {
		cfg.ReplyTTL = DefaultReplyTT * time.Second
	}
	if cfg.Lookback <= 0 {
		cfg.Lookback = 2 * time.Minute
	}
	return &Inbox{cfg: cfg, sealer: newSealer(cfg.Key, 4096), ready: make(chan struct{}),
		recent: bounded.NewCache[string, struct{}](100_000)}
}

// Ready is closed once the inbox's subscription is in place on the relays
// (every connected relay sent EOSE, or 10 s passed): requests published
// after that are not missed, ephemeral ones included.
func (in *Inbox) Ready() <-chan struct{} { return in.ready }

// Run receives and answers messages until ctx ends, then finishes the
// requests already accepted (their answers are still published) and
// returns. The transport must stay open until Run returns. A subscription
// that ends early (a slow consumer dropped by the pool) is reopened from
// the newest event seen.
func (in *Inbox) Run(ctx context.Context) error {
	since, err := in.since(ctx)
	if err != nil {
		return err
	}
	// Accepted work finishes after ctx ends, within a grace period.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	jobs := make(chan *nostr.Event, in.cfg.Queue)
	var wg sync.WaitGroup
	for range in.cfg.Workers {
		wg.Go(func() {
			for ev := range jobs {
				in.handle(work, ev)
			}
		})
	}
	defer func() {
		close(jobs)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			in.cfg.Logger.Warn("inbox: in-flight requests did not finish in 30 s; abandoning them")
			cancel()
			<-done
		}
	}()
	for {
		newest, err := in.listen(ctx, since, jobs, work)
		if ctx.Err() != nil {
			return nil
		}
		in.cfg.Logger.Warn("inbox subscription ended; resubscribing", "err", err)
		if newest > since {
			since = newest - nostr.Timestamp(in.cfg.Lookback/time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// listen runs one subscription from since, queueing the requests it
// receives, until it ends; it returns the newest created_at seen.
func (in *Inbox) listen(ctx context.Context, since nostr.Timestamp, jobs chan<- *nostr.Event, work context.Context) (nostr.Timestamp, error) {
	sub, err := in.cfg.Transport.Subscribe(ctx, nostr.Filter{
		Kinds: []int{KindEphemeral, KindMessage},
		Tags:  nostr.TagMap{"p": {in.cfg.Key.NostrPublicKey()}},
		Since: &since,
	})
	if err != nil {
		return since, fmt.Errorf("relay: inbox subscribe: %w", err)
	}
	defer sub.Close()
	go func() {
		select {
		case <-sub.EOSE():
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		in.readyOnce.Do(func() { close(in.ready) })
	}()
	in.cfg.Logger.Info("inbox listening", "pubkey", in.cfg.Key.NostrPublicKey(), "since", since.Time().UTC())
	newest := since
	for {
		select {
		case <-ctx.Done():
			return newest, nil
		case ev, ok := <-sub.Events():
			if !ok {
				return newest, sub.Err()
			}
			newest = max(newest, min(ev.CreatedAt, nostr.Timestamp(in.cfg.Now().Unix())))
			if !in.addressedToUs(ev) {
				continue
			}
			// Each event once, across resubscriptions too.
			if _, dup := in.recent.Get(ev.ID); dup {
				continue
			}
			in.recent.Put(ev.ID, struct{}{})
			if ev.Kind == KindMessage && in.cfg.Checkpoint != nil {
				if seen, err := in.cfg.Checkpoint.Seen(ctx, ev.ID); err != nil {
					in.cfg.Logger.Error("inbox checkpoint", "err", err)
				} else if seen {
					continue
				}
			}
			select {
			case jobs <- ev:
			default:
				// Every worker is busy and the queue is full: answer
				// at once rather than let the peer time out.
				go in.refuse(work, ev, &snap.Error{Code: snap.CodeServiceUnavailable,
					Message: "busy; try again shortly", Data: map[string]any{"retryAfter": 1}})
			}
		}
	}
}

// since is where the subscription starts: the checkpoint (or now) minus
// the lookback.
func (in *Inbox) since(ctx context.Context) (nostr.Timestamp, error) {
	from := nostr.Timestamp(in.cfg.Now().Unix())
	if in.cfg.Checkpoint != nil {
		ts, err := in.cfg.Checkpoint.Since(ctx)
		if err != nil {
			return 0, err
		}
		if ts > 0 {
			from = ts
		}
	}
	return from - nostr.Timestamp(in.cfg.Lookback/time.Second), nil
}

func (in *Inbox) addressedToUs(ev *nostr.Event) bool {
	return (ev.Kind == KindEphemeral || ev.Kind == KindMessage) && hasTag(ev, "p", in.cfg.Key.NostrPublicKey())
}

// handle answers one request event.
func (in *Inbox) handle(ctx context.Context, ev *nostr.Event) {
	defer in.done(ctx, ev)
	plain, err := in.sealer.open(ev.PubKey, ev.Content)
	if err != nil {
		in.reply(ctx, ev, in.cfg.Responder.Refuse(&snap.Error{Code: snap.CodeInvalidMessage,
			Message: "cannot open the NIP-44 payload", Data: map[string]any{"field": "content", "reason": err.Error()}}))
		return
	}
	var signer [32]byte
	if _, err := decodeHex32(ev.PubKey, &signer); err != nil {
		return // the pool verified the event; its pubkey is 32 bytes
	}
	// The event id names this delivery: a replica sharing the replay
	// store that took it already answers it, and this one stays silent.
	resp := in.cfg.Responder.Respond(ctx, snap.Inbound{Raw: plain, Signer: &signer, Via: ev.ID})
	if resp == nil {
		in.cfg.Logger.Debug("inbox: not a request, or a delivery already taken; no answer", "event", ev.ID)
		return
	}
	in.reply(ctx, ev, resp)
}

// done records a stored request as processed.
func (in *Inbox) done(ctx context.Context, ev *nostr.Event) {
	if ev.Kind != KindMessage || in.cfg.Checkpoint == nil {
		return
	}
	if err := in.cfg.Checkpoint.Done(ctx, ev.ID, ev.CreatedAt); err != nil {
		in.cfg.Logger.Error("inbox checkpoint", "event", ev.ID, "err", err)
	}
}

func (in *Inbox) refuse(ctx context.Context, ev *nostr.Event, e *snap.Error) {
	in.reply(ctx, ev, in.cfg.Responder.Refuse(e))
}

// reply seals resp for the requester and publishes it.
func (in *Inbox) reply(ctx context.Context, req *nostr.Event, resp *snap.Message) {
	plain, err := resp.MarshalJSON()
	if err != nil {
		in.cfg.Logger.Error("inbox: response does not serialize", "err", err)
		return
	}
	content, err := in.sealer.seal(req.PubKey, plain)
	if err != nil {
		in.cfg.Logger.Error("inbox: response cannot be sealed", "request", req.ID, "err", err)
		return
	}
	now := in.cfg.Now()
	ev := nostr.Event{
		PubKey: in.cfg.Key.NostrPublicKey(), CreatedAt: nostr.Timestamp(now.Unix()), Kind: req.Kind,
		Tags: nostr.Tags{{"p", req.PubKey}, {"e", req.ID}}, Content: content,
	}
	if req.Kind == KindMessage {
		ev.Tags = append(ev.Tags, nostr.Tag{"expiration", strconv.FormatInt(now.Add(in.cfg.ReplyTTL).Unix(), 10)})
	}
	if err := signEvent(in.cfg.Key, &ev, in.cfg.Verifier); err != nil {
		in.cfg.Logger.Error("inbox: sign reply", "err", err)
		return
	}
	res, err := in.cfg.Transport.Publish(ctx, ev)
	if err != nil {
		in.cfg.Logger.Error("inbox: reply not published", "request", req.ID, "method", resp.Method, "err", err, "outcome", res)
		return
	}
	in.cfg.Logger.Debug("inbox: answered", "request", req.ID, "method", resp.Method, "to", resp.To)
}
