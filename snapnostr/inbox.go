package snapnostr

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// InboxConfig configures an Inbox.
type InboxConfig struct {
	Key        *identity.Key
	Transport  Transport
	Handler    snap.Handler // answers each message opened (a *snap.Server)
	Checkpoint Checkpoint   // nil: no catch-up of stored requests
	// Verifier, shared with the transport, learns of the replies the
	// inbox signs so that publishing them costs no second verification,
	// and checks the requests set aside for another replica that the
	// inbox takes up (default: a Verifier of the inbox's own).
	Verifier *relay.Verifier
	Logger   *slog.Logger
	Now      func() time.Time
	// Workers handle requests concurrently (default 8); Queue bounds the
	// requests waiting for one (default 256). Waiting requests are served
	// by Nostr key in turn (internal/fairqueue), so a flood, from one key
	// or many, delays another peer by at most one request per key
	// waiting. When the queue is full, a request from a key with fewer
	// waiting than the busiest pushes out the busiest key's newest; the
	// request refused either way is answered at once with 5003, never
	// left to time out.
	//
	// Stored requests are not refused so: those a relay returns for the
	// inbox's subscription before its stored events are all read (a
	// start's or a reconnection's catch-up, page after page on a relay
	// that caps a REQ's) wait for room in the queue instead, by key in
	// turn too, in a backlog of at most Backlog requests (default 8,192)
	// holding at most BacklogBytes (default 16 MiB, as held in memory:
	// relay.EventSize). Only past either bound is a stored request
	// refused with 5003 (or pushed out, as in the queue); one over its
	// key's rate waits there for its allowance (see KeyLimiter). A stored
	// request a live one pushes out of the queue goes back to the
	// backlog. A request kept aside for another replica that nobody took,
	// taken up late (see Replay), waits there too: being late it is never
	// refused, so one the queue has no room for is dropped only past the
	// backlog. A request still waiting when Run stops is not answered,
	// and the relays' points written then stay behind it: the next start
	// asks for it again. Whether a stored request was processed before
	// (Checkpoint) is asked as it leaves the backlog, for up to 64 at a
	// time in one read, not as it arrives: the relay connection that
	// brought it is not held up by a read a request while a restart
	// catches up. One processed before is skipped, and not refused even
	// when pushed out of the backlog.
	Workers, Queue        int
	Backlog, BacklogBytes int
	// Streams bounds the streaming requests answered at once (default
	// 64), which run beside the workers since they last minutes; past it
	// a streaming request is refused at once with 5003. A node sets it
	// past the handler's own stream slots, which then decide who streams.
	Streams int
	// ReplyTTL is the NIP-40 expiration of replies to stored requests
	// (default 7 days), after the reply's created_at, rounded up to the
	// whole second NIP-40 counts in: a reply expires no sooner, and at
	// least a second after it is dated.
	ReplyTTL time.Duration
	// MaxDrift is how far ahead of Now a reply may be dated (default
	// snap.DefaultMaxDrift; a node passes the window of its Validator): a
	// reply is dated no earlier than the request it answers, within it.
	MaxDrift time.Duration
	// Lookback is how far before the checkpoint (or before now, on a first
	// start) the subscription begins, and, with a RelayCheckpoint, how
	// far before its own point each relay is asked again (default 2
	// minutes).
	Lookback time.Duration
	// KeyLimiter, when set, limits the requests of each Nostr key before
	// they are queued (the pool verified the event's signature, so the
	// key is its author's): a live request over its key's allowance is
	// refused with 5002 {"retryAfter", "scope": "key"} and costs no
	// decryption and no worker. A stored request (see Backlog) is counted
	// against its key's allowance as it leaves the backlog, once the
	// checkpoint has told it was not processed (one processed before
	// costs its key nothing), and one over it is not refused: it waits
	// in the backlog, still counted in the relays' points, for as long
	// as the limiter says (asked again at least once a second, so that a
	// rate raised meanwhile reaches it), while the other keys' stored
	// requests go on being queued. It stays within the backlog's bounds meanwhile, and
	// is refused 5003 when they push it out, as any request waiting
	// there; one the backlog had no room for is refused 5002 at once.
	KeyLimiter snap.Limiter
	// Refusals bounds the refusals (queue full, rate limited) waiting to
	// be sent (default 256). A Nostr key is refused at most once a second:
	// its further requests within that second are dropped unanswered, so a
	// flood costs one refusal per key and a second, and another peer's
	// refusal waits behind those rather than being dropped. Past the bound
	// (that many distinct keys refused at once) a refusal is dropped and
	// logged.
	Refusals int
	// Shares, when set, divides the requests among the replicas of this
	// identity (see Shares): a request that is not this process's is not
	// opened, only kept for the Shares' grace in case its owner turns out
	// gone. At most Deferred requests (default 8,192) holding at most
	// DeferredBytes (default 16 MiB, as held in memory: relay.EventSize)
	// are kept so; past either, a request is taken here whatever its
	// share.
	Shares                  Shares
	Deferred, DeferredBytes int
	// StepTimeout bounds each of the inbox's own database steps around a
	// request (default 10 s): the checkpoint's Seen, before the request
	// is queued, and Done, after its answer; the claim of its answer
	// (Replay). A step that takes longer is abandoned as one that failed,
	// so that a database that does not answer holds neither the
	// subscription's reader nor a worker. The handling itself is the
	// Handler's to bound (snap.ServerConfig.RequestTimeout).
	StepTimeout time.Duration
	// Replay, with Shares, is the replay store shared by the replicas.
	// It tells which of the requests kept for another replica some
	// process took (Recorded): when a request's grace passes it is
	// forgotten if it was taken, and taken up here if not (its owner is
	// alive but never took it: it lost the relay that brought it, say).
	// The inbox claims in it the deliveries it answers that may have no
	// replay record of their own: a refusal, an error (validation that
	// failed before the record, a handler that left the request's id
	// unspent) and the answer to a late delivery. Before it sends such an
	// answer it records the pair ("nostr", event id) with the event as its
	// delivery; when another process recorded it first, that process
	// answers and this one sends nothing. The record also tells the
	// others that the delivery was taken, so that none takes it up late
	// and answers it a second time. Nil: a request kept aside is
	// forgotten when its grace passes, and such answers are sent
	// unclaimed.
	Replay SharedReplay
}

// SharedReplay is the replay store the replicas of an identity share,
// which also tells which Nostr deliveries some process took.
type SharedReplay interface {
	snap.ReplayStore
	Recorded
}

// AnswerFrom is the sender under which an Inbox records the deliveries
// it answers (InboxConfig.Replay): no SNAP address, so that
// it never meets a request's own record.
const AnswerFrom = "nostr"

// Recorded tells which Nostr deliveries some process sharing the
// database took: those with a replay record naming the event as their
// delivery (snap.Inbound.Via).
type Recorded interface {
	Recorded(ctx context.Context, eventIDs []string) (map[string]bool, error)
}

// Inbox is the node's receiving side on Nostr: it subscribes to SNAP
// messages addressed to its key (kinds 21339 and 4339), opens them
// (NIP-44, conversation keys cached per peer), has the Handler validate
// and answer them with the event's author as the bound signer, and
// publishes each answer as the same kind with tags p (requester) and e
// (request), plus a NIP-40 expiration on stored kinds.
//
// A request whose own NIP-40 expiration has passed by Now, which a relay
// that does not drop expired events may deliver, is dropped unopened and
// unanswered, as NIP-40 asks of clients; so is one that expires while it
// waits in the queue or the backlog, when its turn comes or when another
// request pushes it out (not refused 5003: "try again" would ask for it
// again), and one that expires while it is kept aside for another
// replica (see Shares), when this one takes it up. Each is counted
// (Expired) and logged, costs its key no allowance, and is finished for
// the relays' points.
//
// Every answer stays within NIP-44's relay.MaxNIP44Plain bytes of plaintext: a
// larger result is shrunk (a task drops its oldest history), else the
// requester gets 5001 {reason, size, limit: 65535, transport: "nostr",
// taskId}; the task keeps its result, which tasks/get over HTTP returns
// whole.
//
// A streaming request (snap.IsStreamRequest) gets each event as its own
// event of that form, published in order, and the final response last; SDK requesters, which take the first inner message of
// type "response", ignore the events and get the final answer. Streams
// end, with their final response, when Run's context ends.
type Inbox struct {
	cfg    InboxConfig
	slots  chan struct{} // one per stream running
	sealer *sealer
	// recent holds the events already queued, each as a 64-bit hash of
	// its id under recentSeed (8 bytes instead of 32: relay's dedupe set
	// says why two ids sharing a hash are of no concern).
	recent     *bounded.Cache[uint64, struct{}]
	recentSeed maphash.Seed
	// deferred holds the requests left to another replica (Shares);
	// late the queued requests taken up late (see snap.Inbound.Late),
	// each until a worker takes it or the queue drops it.
	deferred *deferrals
	late     sync.Map // *nostr.Event → struct{}
	// fed holds the stored requests the backlog's feeder queued, each
	// until a worker takes it or the queue pushes it out (it then goes
	// back to the backlog: see admitTo).
	fed sync.Map // *nostr.Event → struct{}
	// unchecked holds the requests waiting in the backlog whose key's
	// rate is still to be taken, true when the checkpoint is also still
	// to be asked about them: the feeder asks and takes, not the
	// subscription's reader (see admitTo).
	unchecked sync.Map // *nostr.Event → bool
	ready     chan struct{}
	readyOnce sync.Once
	// seenAfter is when (Unix nanoseconds) the checkpoint's Seen is
	// asked again once it timed out (see admit).
	seenAfter atomic.Int64
	// begun is when the Inbox was made: the checkpoint is asked about
	// stored requests dated up to that second only (see admit).
	begun nostr.Timestamp
	// reachEvery is how often Run writes the relays' points while it
	// runs (reachEvery, the constant, but in tests); marks tells which
	// points it may write then.
	reachEvery time.Duration
	marks      *watermark
	// panicLog, unpublishedLog and expiredLog bound the lines of
	// requests whose handling panicked, whose reply the relays refused,
	// or that expired: a peer decides how many requests it sends.
	panicLog, unpublishedLog, expiredLog logcap.Limiter
	// expired counts the requests dropped unprocessed because their
	// NIP-40 expiration had passed (see Expired).
	expired atomic.Int64
}

// NewInbox returns an Inbox for cfg.
func NewInbox(cfg InboxConfig) *Inbox {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.Positive(&cfg.Workers, 8)
	defaults.Positive(&cfg.Queue, 256)
	defaults.Positive(&cfg.Backlog, 8192)
	defaults.Positive(&cfg.BacklogBytes, 16<<20)
	defaults.Positive(&cfg.ReplyTTL, relay.DefaultReplyTT*time.Second)
	defaults.Positive(&cfg.MaxDrift, snap.DefaultMaxDrift)
	defaults.Positive(&cfg.Lookback, 2*time.Minute)
	defaults.Positive(&cfg.Streams, 64)
	defaults.Positive(&cfg.Refusals, 256)
	defaults.Positive(&cfg.Deferred, 8192)
	defaults.Positive(&cfg.DeferredBytes, 16<<20)
	defaults.Positive(&cfg.StepTimeout, 10*time.Second)
	if cfg.Verifier == nil {
		cfg.Verifier = relay.NewVerifier()
	}
	marks := newWatermark()
	in := &Inbox{cfg: cfg, sealer: newSealer(cfg.Key, 4096), ready: make(chan struct{}),
		recent: bounded.NewCache[uint64, struct{}](100_000), recentSeed: maphash.MakeSeed(),
		slots: make(chan struct{}, cfg.Streams), deferred: newDeferrals(cfg.Deferred, cfg.DeferredBytes, marks),
		begun: nostr.Timestamp(cfg.Now().Unix()), reachEvery: reachEvery, marks: marks}
	return in
}

// running is what the requests of one Run share: stop ends with Run's
// context (streams end then), work outlives it for the grace period
// (answers are still published), and streams counts the streams running.
type running struct {
	stop, work context.Context
	streams    sync.WaitGroup
}

// Expired returns how many requests the inbox dropped unprocessed, since
// it was made, because their NIP-40 expiration had passed.
func (in *Inbox) Expired() int64 { return in.expired.Load() }

// Ready is closed once the inbox's subscription is in place on the relays
// (every connected relay sent its stored requests and EOSE, or 10 s
// passed): requests published after that are not missed, ephemeral ones
// included.
func (in *Inbox) Ready() <-chan struct{} { return in.ready }

// Run receives and answers messages until ctx ends, then finishes the
// requests already accepted (their answers are still published) and
// returns. The transport must stay open until Run returns. A subscription
// that ends early (a slow consumer dropped by the pool) is reopened from
// the newest event seen, each relay from its own point.
//
// With a RelayCheckpoint and a transport that begins each relay from its
// own point (a *relay.Pool), Run records each relay's point (see
// relay.Subscription.Resume) every minute and once the requests it
// accepted are finished, and the next Run asks each relay again from its
// own: a request stored on a relay the node could not reach is not
// skipped for the newer ones the other relays brought. A relay's point
// moves only once all it stored since is read, a page at a time past its
// cap on the stored events of one REQ (see relay.Pool.Subscribe), so a
// backlog longer than that cap is not skipped either. A point is written
// only once every request received before it is finished: a request
// dropped as Run stops, or kept aside for another replica (Shares) and
// not known taken, holds it back, and the next Run asks the relay for
// that request again. A relay with no point kept (one added to the
// configuration, or never reached) has one from the moment Run begins:
// where it begins, until it brings a request.
func (in *Inbox) Run(ctx context.Context) error {
	since, from, err := in.since(ctx)
	if err != nil {
		return err
	}
	// Each relay's point as the subscriptions ended, written once the
	// requests accepted are finished, through the watermark: a request
	// dropped as Run stopped, or kept aside for another replica, holds
	// it back (see watermark.last), so that the next start asks the
	// relay for it again.
	reached := map[string]nostr.Timestamp{}
	drained := false
	if rc, ok := in.cfg.Checkpoint.(RelayCheckpoint); ok {
		defer func() {
			if !drained {
				return
			}
			if points := in.marks.last(reached); len(points) > 0 {
				in.reach(context.WithoutCancel(ctx), rc, points)
			}
		}()
	}
	// Accepted work finishes after ctx ends, within a grace period.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	run := &running{stop: ctx, work: work}
	refusals := in.startRefuser(work)
	jobs := fairqueue.New[string, *nostr.Event](in.cfg.Queue)
	var wg sync.WaitGroup
	for range in.cfg.Workers {
		wg.Go(func() {
			for ev, ok := jobs.Pop(); ok; ev, ok = jobs.Pop() {
				in.serve(run, ev)
			}
		})
	}
	defer func() {
		jobs.Close()
		done := make(chan struct{})
		// Workers first: no stream starts after they are done.
		go func() { refusals.stop(); wg.Wait(); run.streams.Wait(); close(done) }()
		select {
		case <-done:
			drained = true
		case <-time.After(30 * time.Second):
			in.cfg.Logger.Warn("inbox: in-flight requests did not finish in 30 s; abandoning them")
			cancel()
			<-done
		}
	}()
	// The stored requests waiting for room in the queue; deferred after
	// the queue's closing, so run before it: what still waits as ctx
	// ends is dropped, left counted in the watermark.
	wait := &backlog{q: fairqueue.New[string, *nostr.Event](in.cfg.Backlog), max: int64(in.cfg.BacklogBytes)}
	var feeder sync.WaitGroup
	feeder.Go(func() { in.feed(ctx, wait, jobs, refusals) })
	defer func() { wait.q.Close(); feeder.Wait() }()
	if in.cfg.Shares != nil {
		// Deferred after the queue's closing, so run before it: the
		// review has stopped (ctx ended) when the queue closes.
		var review sync.WaitGroup
		review.Go(func() {
			in.reviewDeferred(ctx, min(in.cfg.Shares.Grace()/8, 250*time.Millisecond), jobs, wait, refusals)
		})
		defer review.Wait()
	}
	lookback := nostr.Timestamp(in.cfg.Lookback / time.Second)
	// As the first subscription is made, each relay's point is kept
	// where it begins (RelayCheckpoint), and a later subscription
	// begins it there again until it brings a request: a relay with no
	// point kept (one added to the configuration, or never reached)
	// would otherwise resume, after a restart, from the newest request
	// processed, not held behind the requests in flight (see watermark)
	// until a minute-by-minute write kept a point for it. Where a relay
	// begins (the lookback taken off already) is behind every request
	// it brings: none is received yet, and each is dated since. A point
	// only moves forward, so one kept already stays, and the first
	// request a relay brings moves its own past its start.
	began := false
	begin := func(starts map[string]nostr.Timestamp) {
		if began {
			return
		}
		began = true
		for url, at := range starts {
			from[url] = max(from[url], at)
		}
		if rc, ok := in.cfg.Checkpoint.(RelayCheckpoint); ok && len(starts) > 0 {
			in.reach(ctx, rc, starts)
		}
	}
	for {
		newest, points, err := in.listen(ctx, since, from, jobs, wait, refusals, begin)
		for url, at := range points {
			reached[url] = max(reached[url], at)
			from[url] = max(from[url], at-lookback)
		}
		if ctx.Err() != nil {
			return nil
		}
		in.cfg.Logger.Warn("inbox subscription ended; resubscribing", "err", err)
		if newest > since {
			since = newest - lookback
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// funcSubscriber is a Transport that can hand each event to a function
// in the goroutine that receives it (relay.Pool.SubscribeFunc): the
// inbox then queues each request without a goroutine hand-off of its own.
// take is called for one event at a time, never after the subscription
// has ended, and must not block.
type funcSubscriber interface {
	SubscribeFunc(ctx context.Context, f nostr.Filter, take func(*nostr.Event)) (*relay.Subscription, error)
}

// gatedSubscriber is a Transport that can also pass over, unverified, the
// events another replica takes (relay.Pool.SubscribeGated).
type gatedSubscriber interface {
	SubscribeGated(ctx context.Context, f nostr.Filter, take func(*nostr.Event), g relay.Gate) (*relay.Subscription, error)
}

// resumingSubscriber is a Transport that can begin each relay from its
// own point (relay.Pool.SubscribeWith).
type resumingSubscriber interface {
	SubscribeWith(ctx context.Context, f nostr.Filter, o relay.SubscribeOptions) (*relay.Subscription, error)
}

// reachEvery is how often a running inbox writes each relay's point
// (RelayCheckpoint.Reached), so that a node that does not stop cleanly
// resumes from a recent one; Run writes them again once its requests are
// finished. It writes only points read before every request it had
// accepted then was finished (see watermark): one written while a request
// still waits in the queue, or is being handled, would have a node that
// stops uncleanly skip that request after its restart.
const reachEvery = time.Minute

// listen runs one subscription from since (each relay in from, from its
// own), queueing the requests it receives, until it ends; it returns the
// newest created_at seen and each relay's point (relay.Subscription.Resume).
// With a transport that tells stored events from live ones (a
// *relay.Pool), the stored requests wait in wait for room in the queue.
// begin gets, once the subscription is made, where each relay begins
// (relay.Subscription.Starts).
func (in *Inbox) listen(ctx context.Context, since nostr.Timestamp, from map[string]nostr.Timestamp, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser, begin func(map[string]nostr.Timestamp)) (nostr.Timestamp, map[string]nostr.Timestamp, error) {
	f := nostr.Filter{
		Kinds: []int{relay.KindEphemeral, relay.KindMessage},
		Tags:  nostr.TagMap{"p": {in.cfg.Key.NostrPublicKey()}},
		Since: &since,
	}
	var newest atomic.Int64 // the newest created_at seen, not after now
	newest.Store(int64(since))
	seen := func(ev *nostr.Event) {
		at := int64(min(ev.CreatedAt, nostr.Timestamp(in.cfg.Now().Unix())))
		for old := newest.Load(); at > old && !newest.CompareAndSwap(old, at); old = newest.Load() {
		}
	}
	take := func(ev *nostr.Event) {
		seen(ev)
		in.receive(ctx, ev, jobs, wait, false, refusals)
	}
	stored := func(ev *nostr.Event) {
		seen(ev)
		in.receive(ctx, ev, jobs, wait, true, refusals)
	}
	// The subscription ends as listen returns, not with ctx: its points
	// are read while it still delivers (see the end of listen).
	subCtx, endSub := context.WithCancel(context.WithoutCancel(ctx))
	defer endSub()
	var sub *relay.Subscription
	var err error
	rs, resuming := in.cfg.Transport.(resumingSubscriber)
	gs, gated := in.cfg.Transport.(gatedSubscriber)
	fs, direct := in.cfg.Transport.(funcSubscriber)
	switch {
	case resuming:
		o := relay.SubscribeOptions{Take: take, Stored: stored, Since: from}
		if in.cfg.Shares != nil {
			o.Gate = relay.Gate{Pass: in.cfg.Shares.Mine,
				Aside: func(ev *nostr.Event) { in.setAside(ctx, ev, jobs, wait, refusals) }}
		}
		sub, err = rs.SubscribeWith(subCtx, f, o)
	case gated && in.cfg.Shares != nil:
		// Another replica's share is passed over before its signature is
		// checked: only this process's share costs a verification.
		sub, err = gs.SubscribeGated(subCtx, f, take, relay.Gate{Pass: in.cfg.Shares.Mine,
			Aside: func(ev *nostr.Event) { in.setAside(ctx, ev, jobs, wait, refusals) }})
	case direct:
		sub, err = fs.SubscribeFunc(subCtx, f, take)
	default:
		sub, err = in.cfg.Transport.Subscribe(subCtx, f)
	}
	if err != nil {
		return since, nil, fmt.Errorf("snapnostr: inbox subscribe: %w", err)
	}
	defer sub.Close()
	begin(sub.Starts())
	if rc, ok := in.cfg.Checkpoint.(RelayCheckpoint); ok {
		tick := time.NewTicker(in.reachEvery)
		defer tick.Stop()
		ended := make(chan struct{})
		defer close(ended)
		go func() {
			for {
				select {
				case <-ended:
					return
				case <-tick.C:
					in.reach(ctx, rc, in.marks.next(sub.Resume()))
				}
			}
		}()
	}
	go func() {
		select {
		case <-sub.EOSE():
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		in.readyOnce.Do(func() { close(in.ready) })
	}()
	in.cfg.Logger.Info("inbox listening", "pubkey", in.cfg.Key.NostrPublicKey(), "since", since.Time().UTC())
	for {
		select {
		case <-ctx.Done():
			// A request the points take in was handed to take, and
			// counted in the watermark (one whose Seen fails now is
			// dropped, and holds the points written back), or another
			// relay's copy of it is being handed over: take runs before
			// Close returns, and counts it then. The pool moves no point
			// for a delivery Close drops. take is not running, nor called
			// again, once Close returns; with Subscribe, what the
			// subscription buffered is taken.
			points := sub.Resume()
			sub.Close()
			for ev := range sub.Events() {
				take(ev)
			}
			return nostr.Timestamp(newest.Load()), points, nil
		case ev, ok := <-sub.Events(): // with SubscribeFunc: only closed
			if !ok {
				return nostr.Timestamp(newest.Load()), sub.Resume(), sub.Err()
			}
			take(ev)
		}
	}
}

// MaxRequestEventSize bounds a request event the inbox takes, as held in
// memory (relay.EventSize): NIP-44's largest payload (87,472 bytes of
// base64) and room to spare for its tags. No SNAP request over Nostr is
// larger; a relay's frame may be 1 MiB, which as an event of many tags
// holds about 18 MiB. So the requests queued, handled and kept aside
// hold at most this much each.
const MaxRequestEventSize = 128 << 10

// take queues one request received, unless it is not for this node, was
// seen before, is another replica's (kept aside, see Shares) or its key is
// over its rate (refused at once); a full queue refuses a request at once
// too (see InboxConfig.Workers), and so does a request event larger than
// MaxRequestEventSize, unopened. Refused, not made to wait (the pool's
// backpressure): take runs on the reader of a relay connection, which
// would then hold up every other peer's requests and answers on that
// relay behind one peer's flood, where the queue serves keys in turn; and
// a refusal is an answer: the peer is not left to time out. Even the
// answers to the requests queued would wait: the relay's OKs to their
// publication come on that reader.
func (in *Inbox) take(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], refusals *refuser) {
	in.receive(ctx, ev, jobs, nil, false, refusals)
}

// receive is take with the backlog wait (see InboxConfig.Backlog), when
// set: a stored request waits there for room in the queue rather than
// being refused, and one the feeder queued that a request pushes out of
// the queue goes back there. The reader still does not wait, the
// backlog's feeder does.
func (in *Inbox) receive(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, stored bool, refusals *refuser) {
	// Each event once, across resubscriptions too.
	id, ok := in.requestID(ev)
	if !ok || !in.firstSight(id) || in.dropExpired(ctx, ev, "received") {
		return
	}
	if size := relay.EventSize(ev); size > MaxRequestEventSize {
		refusals.refuse(ev, &snap.Error{Code: snap.CodeInvalidMessage, Message: "request event too large",
			Data: map[string]any{"field": "event", "size": size, "limit": MaxRequestEventSize}})
		return
	}
	if sh := in.cfg.Shares; sh != nil && !sh.Mine(id) && in.deferred.add(id, ev, in.cfg.Now().Add(sh.Grace()), true, !sh.Counted()) == kept {
		return
	}
	in.admitTo(ctx, ev, jobs, wait, stored, refusals, false)
}

// requestID returns the id of ev if it is a request for this node (its
// kind and its p tag) with a well-formed id (the pool checked a taken
// event's id; a set-aside one's is only decoded).
func (in *Inbox) requestID(ev *nostr.Event) (id [32]byte, ok bool) {
	if !in.addressedToUs(ev) {
		return id, false
	}
	_, err := relay.DecodeHex32(ev.ID, &id)
	return id, err == nil
}

// firstSight records a verified event's id and reports whether it is new.
func (in *Inbox) firstSight(id [32]byte) bool {
	return in.recent.Add(maphash.Comparable(in.recentSeed, id), struct{}{})
}

// setAside keeps a request the pool passed over for another replica
// (relay.Gate), unverified, for the Shares' grace; when the bounds leave
// no room it is verified and taken here, as a live request (receive): a
// stored request it pushes out of the queue goes back to the backlog
// wait.
func (in *Inbox) setAside(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser) {
	id, ok := in.requestID(ev)
	if !ok {
		return
	}
	// Past the bounds, or when copies claiming the id (forged ones, it
	// may be) fill its entry, this copy is checked now and taken as a
	// verified one: kept aside as the request (no number of forgeries
	// shuts the genuine out), or queued when there is no room.
	sh := in.cfg.Shares
	if relay.EventSize(ev) > MaxRequestEventSize {
		// Refused at once (see take), never kept.
		if in.verify(ev) {
			in.receive(ctx, ev, jobs, wait, false, refusals)
		}
		return
	}
	if in.deferred.add(id, ev, in.cfg.Now().Add(sh.Grace()), false, !sh.Counted()) != kept && in.verify(ev) {
		in.receive(ctx, ev, jobs, wait, false, refusals)
	}
}

// verify checks the id and signature of an event the pool did not check,
// and reports whether they hold.
func (in *Inbox) verify(ev *nostr.Event) bool {
	if err := in.cfg.Verifier.Verify(ev); err != nil {
		in.cfg.Logger.Debug("inbox: dropped an invalid event", "event", ev.ID, "err", err)
		return false
	}
	return true
}

// admit queues a request this process takes, unless it was processed
// before or its key is over its rate. A late one (see snap.Inbound.Late)
// is dropped where another would be refused: its owner answered it.
//
// The request is counted in the watermark from here until it is
// finished; one dropped because ctx ended (its Seen failed) stays
// counted, so that the relays' points written as Run stops stay behind
// it and the next start asks for it again.
func (in *Inbox) admit(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], refusals *refuser, late bool) {
	in.admitTo(ctx, ev, jobs, nil, false, refusals, late)
}

// admitTo is admit with the backlog wait, when set (see
// InboxConfig.Backlog): a stored request waits there for room in the
// queue, and is queued at once, or refused, when the backlog has no room
// either; a stored request the feeder queued that ev pushes out of the
// queue goes back there rather than being refused.
//
// The checkpoint is asked about a stored request dated up to the second
// the Inbox began, or taken up late from another replica: what a process
// before this one, or that replica, may have processed. A request dated
// later is new to the database as far as the checkpoint can tell, and
// asking would cost a read (a round trip on PostgreSQL) per request;
// should it be a replay all the same (a requester's clock ahead, a
// replica's answer), the replay store stops it, as it stops anything the
// checkpoint missed. One that waits in the backlog is asked about by the
// feeder, a batch at a time, and its key's rate is checked then, after
// the checkpoint: the subscription's reader, which admits it, does not
// wait for the database behind the thousands of stored requests a
// restart's catch-up may bring, holding up every other event of that
// relay connection. A stored request over its key's rate then waits in
// the backlog for its key's allowance (see feed) rather than being
// refused: only live requests, and stored ones the backlog has no room
// for, are refused 5002.
func (in *Inbox) admitTo(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, stored bool, refusals *refuser, late bool) {
	in.marks.accepted(ev)
	if wait != nil && stored {
		// A stored request, or a late one, waits its turn in the
		// backlog; only one the backlog has no room for is queued or
		// refused (dropped, when late) below.
		if late {
			in.late.Store(ev, struct{}{})
		}
		ask := in.asksSeen(ev, late)
		check := ask || in.cfg.KeyLimiter != nil
		if check {
			in.unchecked.Store(ev, ask)
		}
		if in.wait(ctx, ev, wait, refusals) {
			return // the feeder checks it
		}
		if !check {
			in.push(ctx, ev, jobs, wait, refusals)
			return
		}
		// The backlog has no room: checked here, then queued or
		// refused.
		in.unchecked.Delete(ev)
		in.late.Delete(ev)
	}
	if !in.admissible(ctx, ev, refusals, late) {
		return
	}
	if late {
		in.late.Store(ev, struct{}{})
	}
	in.push(ctx, ev, jobs, wait, refusals)
}

// asksSeen reports whether the checkpoint is asked about ev before it is
// queued (see admitTo).
func (in *Inbox) asksSeen(ev *nostr.Event, late bool) bool {
	return ev.Kind == relay.KindMessage && in.cfg.Checkpoint != nil && (late || ev.CreatedAt <= in.begun)
}

// admissible reports whether ev may be queued: it was not processed
// before (when the checkpoint is asked about it: see admitTo), and its
// key is within its rate. A request that may not is finished in the
// watermark, and refused when over its key's rate (unless late); one
// whose Seen failed because ctx ended is dropped and left counted.
func (in *Inbox) admissible(ctx context.Context, ev *nostr.Event, refusals *refuser, late bool) bool {
	if in.asksSeen(ev, late) {
		seen, stopping := in.processed(ctx, []*nostr.Event{ev})
		switch {
		case stopping:
			return false // dropped, and left counted
		case seen[ev.ID]:
			in.marks.finished(ev)
			return false
		}
	}
	return in.allowed(ev, refusals, late)
}

// allowed reports whether ev's key is within its rate (KeyLimiter); one
// over it is refused (unless late) and finished in the watermark.
func (in *Inbox) allowed(ev *nostr.Event, refusals *refuser, late bool) bool {
	if in.cfg.KeyLimiter == nil {
		return true
	}
	ok, wait := in.cfg.KeyLimiter.Allow(ev.PubKey)
	if !ok {
		if !late {
			refusals.refuse(ev, snap.RateLimited(wait, "key", in.cfg.KeyLimiter))
		}
		in.marks.finished(ev)
	}
	return ok
}

// processed asks the checkpoint which of evs were processed before a
// restart, or by another process sharing the database, and logs those:
// in one read when it can (SeenManyCheckpoint), else one read a request.
// It reports stopping, and no answer, when ctx ended first: the requests
// are then dropped, left counted in the watermark. A checkpoint that
// fails, or does not answer within seenTimeout, answers nothing: the
// requests are queued as ones not processed (the replay store still
// stops a second processing), and, once it timed out, it is not asked
// for seenPause, so that a database that does not answer holds the
// caller (the feeder, or the subscription's reader when the backlog has
// no room) seenTimeout once, not once a request.
func (in *Inbox) processed(ctx context.Context, evs []*nostr.Event) (seen map[string]bool, stopping bool) {
	ask := func(f func(context.Context) error) bool {
		if in.cfg.Now().UnixNano() < in.seenAfter.Load() {
			return false
		}
		sctx, cancel := context.WithTimeout(ctx, min(in.cfg.StepTimeout, seenTimeout))
		defer cancel()
		err := f(sctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			stopping = true
			return false
		}
		if sctx.Err() != nil {
			in.seenAfter.Store(in.cfg.Now().Add(seenPause).UnixNano())
		}
		in.cfg.Logger.Error("inbox checkpoint", "err", err)
		return false
	}
	if m, ok := in.cfg.Checkpoint.(SeenManyCheckpoint); ok && len(evs) > 1 {
		ids := make([]string, len(evs))
		for i, ev := range evs {
			ids[i] = ev.ID
		}
		ask(func(ctx context.Context) (err error) {
			seen, err = m.SeenMany(ctx, ids)
			return err
		})
	} else {
		seen = map[string]bool{}
		for _, ev := range evs {
			if !ask(func(ctx context.Context) error {
				ok, err := in.cfg.Checkpoint.Seen(ctx, ev.ID)
				if ok {
					seen[ev.ID] = true
				}
				return err
			}) {
				break
			}
		}
	}
	if stopping {
		return nil, true
	}
	for _, ev := range evs {
		if seen[ev.ID] {
			// Processed before a restart, or by another process
			// sharing the database.
			in.cfg.Logger.Debug("inbox: event already processed", "event", ev.ID)
		}
	}
	return seen, false
}

// push queues ev, refusing it (or the request it pushes out) when the
// queue is full (see InboxConfig.Workers); a stored request the feeder
// queued that ev pushes out goes back to the backlog wait, when set, and
// one pushed out whose NIP-40 expiration has passed is dropped
// unanswered (see dropExpired).
func (in *Inbox) push(ctx context.Context, ev *nostr.Event, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser) {
	// When every worker is busy and the queue is full, the request
	// refused is answered soon rather than left to time out.
	switch out, res := jobs.Push(ev.PubKey, ev); res {
	case fairqueue.Refused:
		in.marks.finished(ev)
		if _, wasLate := in.late.LoadAndDelete(ev); !wasLate {
			refusals.refuse(ev, busy())
		}
	case fairqueue.Displaced:
		if _, fed := in.fed.LoadAndDelete(out); fed && wait != nil && in.wait(ctx, out, wait, refusals) {
			return // a stored request: it waits for room again
		}
		in.marks.finished(out)
		if _, wasLate := in.late.LoadAndDelete(out); !in.dropExpired(ctx, out, "queue") && !wasLate {
			refusals.refuse(out, busy())
		}
	}
}

// wait puts the stored request ev in the backlog, refusing those it
// pushes out, and reports whether it did; when it did not (the backlog
// has no room for ev), ev is the caller's to queue or refuse. A request
// pushed out that the checkpoint was still to be asked about is asked
// about first: one processed before is not refused, its requester had
// its answer. One waiting for its key's allowance is refused so too. One
// whose NIP-40 expiration has passed is dropped unanswered, and the
// checkpoint is not asked about it (see dropExpired).
func (in *Inbox) wait(ctx context.Context, ev *nostr.Event, wait *backlog, refusals *refuser) bool {
	out, res := wait.add(ev)
	var unchecked []*nostr.Event
	for i, o := range out {
		ask, ok := in.unchecked.LoadAndDelete(o)
		if in.dropExpired(ctx, o, "backlog") {
			in.late.Delete(o)
			in.marks.finished(o)
			out[i] = nil
			continue
		}
		if ok && ask.(bool) {
			unchecked = append(unchecked, o)
		}
	}
	seen, stopping := in.processed(ctx, unchecked)
	for _, out := range out {
		if out == nil {
			continue // expired, dropped above
		}
		_, wasLate := in.late.LoadAndDelete(out)
		if stopping && slices.Contains(unchecked, out) {
			continue // dropped, and left counted
		}
		in.marks.finished(out)
		if !wasLate && !seen[out.ID] {
			refusals.refuse(out, busy())
		}
	}
	return res != fairqueue.Refused
}

// backlog holds the stored requests waiting for room in the queue (see
// InboxConfig.Backlog), by key in turn, and the bytes they hold.
type backlog struct {
	q *fairqueue.Queue[string, *nostr.Event]
	// mu is held by add: its check of the bytes and the requests it
	// pushes out for them are one step among the relays' readers.
	mu    sync.Mutex
	bytes atomic.Int64 // as held in memory (relay.EventSize)
	max   int64
}

// add puts ev in the backlog, as fairqueue.Queue.Push does, and bounds
// its bytes as Push bounds its count: past either bound the busiest key
// loses its newest requests (out) while ev's key holds fewer, else ev is
// refused. So a key whose requests fill the bytes does not shut the
// others out. Its bytes go past the bound by less than one request, when
// the busiest key has no more to lose (or the backlog is empty).
func (b *backlog) add(ev *nostr.Event) (out []*nostr.Event, res fairqueue.Result) {
	size := relay.EventSize(ev)
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.bytes.Load()+size > b.max {
		o, ok := b.q.Evict(ev.PubKey)
		if !ok {
			break
		}
		b.bytes.Add(-relay.EventSize(o))
		out = append(out, o)
	}
	if len(out) == 0 && b.bytes.Load()+size > b.max && b.q.Len() > 0 {
		return nil, fairqueue.Refused
	}
	o, res := b.q.Push(ev.PubKey, ev)
	switch res {
	case fairqueue.Refused:
		// Only with a count full and nothing pushed out for bytes: one
		// pushed out would have left room.
		return out, res
	case fairqueue.Displaced:
		b.bytes.Add(-relay.EventSize(o))
		out = append(out, o)
	}
	b.bytes.Add(size)
	if len(out) > 0 {
		res = fairqueue.Displaced
	}
	return out, res
}

// feed moves the backlog's requests into the queue as it makes room,
// until the backlog is closed; once ctx ends, what is left is dropped,
// still counted in the watermark (see admit), for the next start to ask
// the relays for again. It takes the requests a batch at a time (at most
// seenBatch, those waiting), drops those whose NIP-40 expiration has
// passed (see dropExpired: the checkpoint is not asked about them, as
// none is when pushed out of the backlog), asks the checkpoint about
// those the reader left unchecked in one read (see admitTo), skips the
// ones processed before, and takes the others' keys' rates then.
//
// A key over its rate is not refused: its requests go back to the head
// of its turn in the backlog, held there (fairqueue.Queue.Hold) for as
// long as the key limiter says, but at most maxHold before it is asked
// again, while the other keys' requests go on being fed. They stay counted in the watermark, and in the backlog's
// bounds: a request the bounds push out is refused 5003 as any other
// there (see wait).
//
// A panic while feeding one request is recovered: that request is
// refused with 5001 (unless late), finished in the watermark, and the
// feeder goes on with the others.
func (in *Inbox) feed(ctx context.Context, wait *backlog, jobs *fairqueue.Queue[string, *nostr.Event], refusals *refuser) {
	dropped := 0
	rel := &releases{q: wait.q, timers: map[string]*time.Timer{}}
	defer rel.stop()
	var batch, unchecked []*nostr.Event
	var limit []bool               // whether batch[i]'s key's rate is still to take
	held := map[string]*heldBack{} // the keys over their rate in this batch
	for ev, ok := wait.q.Pop(); ok; ev, ok = wait.q.Pop() {
		batch = append(batch[:0], ev)
		for len(batch) < seenBatch {
			ev, ok := wait.q.TryPop()
			if !ok {
				break
			}
			batch = append(batch, ev)
		}
		unchecked, limit = unchecked[:0], limit[:0]
		n := 0
		for _, ev := range batch {
			ask, ok := in.unchecked.LoadAndDelete(ev)
			if in.dropExpired(ctx, ev, "backlog") {
				// Dropped before the checkpoint is asked about the
				// batch: processed before or not, it is not queued.
				in.late.Delete(ev)
				in.marks.finished(ev)
				wait.bytes.Add(-relay.EventSize(ev))
				continue
			}
			batch[n] = ev
			n++
			limit = append(limit, ok)
			if ok && ask.(bool) {
				unchecked = append(unchecked, ev)
			}
		}
		clear(batch[n:])
		batch = batch[:n]
		var seen map[string]bool
		if ctx.Err() == nil {
			seen = in.processedOrNot(ctx, unchecked)
		}
		for i, ev := range batch {
			if in.feedOne(ctx, ev, limit[i], seen, held, wait, jobs, refusals) {
				dropped++
			}
		}
		for key, h := range held {
			dropped += in.holdBack(key, h, wait, rel)
		}
		clear(held)
		clear(batch)
		clear(unchecked)
	}
	if dropped > 0 {
		in.cfg.Logger.Info("inbox: stored requests still waiting for the queue as the inbox stops; the next start asks the relays for them again",
			"count", dropped)
	}
}

// heldBack is what a batch of the feeder gives back to the backlog of a
// key over its rate: its requests, in order, and how long it waits.
type heldBack struct {
	evs   []*nostr.Event
	after time.Duration
}

// minHold is the shortest a key over its rate is held: a limiter that
// says no wait would otherwise have the feeder ask it in a loop. maxHold
// is the longest before the limiter is asked again: its wait may outlast
// the rate it was reckoned at (a reload, or a replica leaving, raises a
// key's allowance), or never end (rate.InfDuration, of a rate near
// zero), and the key's requests, counted in the watermark all the while,
// hold every relay's point back. Asking again costs the key nothing: a
// refused Allow takes no allowance.
const (
	minHold = 10 * time.Millisecond
	maxHold = time.Second
)

// feedOne moves ev, of a batch the feeder took, into the queue, unless ctx
// ended (it is then dropped, left counted, and feedOne reports true), it
// was processed before (seen), or its key is over its rate (limit: its
// rate is still to take): it then goes in held, to go back to the
// backlog, as do those of a key held in this batch already.
func (in *Inbox) feedOne(ctx context.Context, ev *nostr.Event, limit bool, seen map[string]bool, held map[string]*heldBack,
	wait *backlog, jobs *fairqueue.Queue[string, *nostr.Event], refusals *refuser) (dropped bool) {
	back := false
	// The bytes of a batch are the backlog's until each is queued or
	// let go.
	defer func() {
		if !back {
			wait.bytes.Add(-relay.EventSize(ev))
		}
	}()
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		back, dropped = false, false
		_, late := in.late.LoadAndDelete(ev)
		in.fed.Delete(ev)
		in.panicLog.Log(ctx, in.cfg.Logger, in.cfg.Now(), slog.LevelError, "inbox: feeding a stored request panicked; refused with 5001",
			"event", ev.ID, "peer", ev.PubKey, "late", late, "panic", p, "stack", string(debug.Stack()))
		in.marks.finished(ev)
		if !late {
			refusals.refuse(ev, &snap.Error{Code: snap.CodeInternal, Message: "internal error"})
		}
	}()
	switch {
	case ctx.Err() != nil:
		in.late.Delete(ev)
		return true
	case in.dropExpired(ctx, ev, "backlog"):
		in.late.Delete(ev)
		in.marks.finished(ev)
		return false
	case seen[ev.ID]:
		in.late.Delete(ev)
		in.marks.finished(ev)
		return false
	}
	if limit && in.cfg.KeyLimiter != nil {
		if h := held[ev.PubKey]; h != nil {
			h.evs = append(h.evs, ev)
			back = true
			return false
		}
		if ok, after := in.cfg.KeyLimiter.Allow(ev.PubKey); !ok {
			held[ev.PubKey] = &heldBack{evs: []*nostr.Event{ev}, after: min(max(after, minHold), maxHold)}
			back = true
			return false
		}
	}
	// Marked before it is queued: a worker may take it at once.
	in.fed.Store(ev, struct{}{})
	if !jobs.Wait(ctx, ev.PubKey, ev) {
		in.fed.Delete(ev)
		in.late.Delete(ev)
		return true
	}
	return false
}

// holdBack puts the requests of key over its rate back at the head of
// its turn in the backlog, their rate still to take, and holds key there
// until its allowance (see feed). It returns how many it dropped instead:
// all of them once the backlog is closed.
func (in *Inbox) holdBack(key string, h *heldBack, wait *backlog, rel *releases) (dropped int) {
	for _, ev := range h.evs {
		in.unchecked.Store(ev, false)
	}
	wait.q.Hold(key)
	if wait.q.Return(key, h.evs...) {
		rel.after(key, h.after)
		return 0
	}
	for _, ev := range h.evs {
		in.unchecked.Delete(ev)
		in.late.Delete(ev)
		wait.bytes.Add(-relay.EventSize(ev))
	}
	return len(h.evs)
}

// releases releases the keys of the backlog held for their rate, each
// once its wait is over.
type releases struct {
	q      *fairqueue.Queue[string, *nostr.Event]
	mu     sync.Mutex
	timers map[string]*time.Timer
}

// after releases key in d.
func (r *releases) after(key string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.timers[key]; t != nil {
		t.Stop()
	}
	r.timers[key] = time.AfterFunc(d, func() {
		r.mu.Lock()
		delete(r.timers, key)
		r.mu.Unlock()
		r.q.Release(key)
	})
}

// stop stops the timers still running.
func (r *releases) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.timers {
		t.Stop()
	}
	clear(r.timers)
}

// processedOrNot is processed for the feeder: a panic of the checkpoint
// is recovered and logged, and answers nothing, as a checkpoint that
// fails does (the replay store still stops a second processing). The
// requests are dropped, left counted, when ctx ended first.
func (in *Inbox) processedOrNot(ctx context.Context, evs []*nostr.Event) (seen map[string]bool) {
	defer func() {
		if p := recover(); p != nil {
			in.panicLog.Log(ctx, in.cfg.Logger, in.cfg.Now(), slog.LevelError, "inbox: asking the checkpoint about stored requests panicked",
				"count", len(evs), "panic", p, "stack", string(debug.Stack()))
			seen = nil
		}
	}()
	seen, _ = in.processed(ctx, evs) // stopping: ctx ended, see feedOne
	return seen
}

// seenBatch bounds the requests the backlog's feeder takes at once, and
// so those it asks the checkpoint about in one read. The batch is out of
// the backlog's count (InboxConfig.Backlog) but not of its bytes until
// each of its requests is queued or let go.
const seenBatch = 64

// seenTimeout bounds the checkpoint's Seen (or SeenMany), which the
// backlog's feeder waits for, or the subscription's reader (a live
// request, or a stored one the backlog has no room for): past it the
// requests are queued as ones not seen (the replay store still stops a
// second processing).
const seenTimeout = 2 * time.Second

// seenPause is how long the checkpoint's Seen is not asked once it
// timed out: the requests meanwhile are queued unchecked.
const seenPause = 10 * time.Second

// reviewDeferred takes up, every tick until ctx ends, the requests kept
// aside that have become this process's (their owner stopped receiving);
// of those whose grace has passed it forgets the ones some process took
// (Recorded) and takes up the others, late (see snap.Inbound.Late). Each
// pass has half the grace for its reads of the database.
func (in *Inbox) reviewDeferred(ctx context.Context, tick time.Duration, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser) {
	// No bound of periodic.Pass: a pass bounds its reads itself, by
	// half the grace, and then takes up what it could not tell of.
	_ = periodic.Every(ctx, "inbox review", tick, 0, func(ctx context.Context) error {
		in.reviewPass(ctx, jobs, wait, refusals)
		return nil
	}, nil)
}

// reviewPass is one pass of reviewDeferred, until ctx ends.
// A request taken up late waits in the backlog wait, when set, for room
// in the queue: being late it is never refused, and nobody else took it.
func (in *Inbox) reviewPass(ctx context.Context, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser) {
	pass, cancel := context.WithTimeout(ctx, in.cfg.Shares.Grace()/2)
	defer cancel()
	take, due := in.deferred.review(in.cfg.Now(), in.cfg.Shares.Mine)
	late := in.notTaken(pass, due)
	if ctx.Err() != nil {
		// Stopping: the requests are this process's no longer. They
		// stay counted in the watermark, as those still kept aside do:
		// the relays' points written at the stop stay behind them.
		return
	}
	if len(due) > 0 {
		in.deferred.left.Add(int64(len(due) - len(late)))
		in.cfg.Logger.Debug("inbox: requests left to other replicas", "count", len(due)-len(late), "not taken", len(late))
	}
	// Taken up on ctx, not on the pass: the pass may have run out on
	// Recorded, and admit takes a context that ended for the node
	// stopping (its own steps are bounded). Each is counted taken up
	// there, unless it expired meanwhile.
	for _, d := range take {
		in.cfg.Logger.Debug("inbox: took up another replica's request", "event", d.evs[0].ID)
		in.takeUp(ctx, d, jobs, wait, refusals, false)
	}
	for _, d := range late {
		in.cfg.Logger.Debug("inbox: took up a request nobody took", "event", d.evs[0].ID)
		in.takeUp(ctx, d, jobs, wait, refusals, true)
	}
}

// notTaken returns the requests due that no process took: none without
// Recorded, all when the database cannot tell (it failed, or did not
// answer in time). The others, forgotten, are finished in the watermark.
func (in *Inbox) notTaken(ctx context.Context, due []*deferral) []*deferral {
	if len(due) == 0 {
		return nil
	}
	if in.cfg.Replay == nil {
		for _, d := range due {
			in.marks.finished(d)
		}
		return nil
	}
	ids := make([]string, len(due))
	for i, d := range due {
		ids[i] = hex.EncodeToString(d.id[:])
	}
	taken, err := in.cfg.Replay.Recorded(ctx, ids)
	if err != nil && ctx.Err() == nil {
		in.cfg.Logger.Warn("inbox: cannot tell which requests another replica took", "count", len(ids), "err", err)
	}
	var out []*deferral
	for i, d := range due {
		if taken[ids[i]] {
			in.marks.finished(d)
		} else {
			out = append(out, d)
		}
	}
	return out
}

// takeUp queues a request kept aside: the copy the pool verified, or the
// first of the unverified copies that verifies. The copy queued is
// counted in the watermark in d's place and epoch; when none is, d is
// finished. One whose NIP-40 expiration passed while it was kept aside
// is dropped (see dropExpired) before it costs its key any allowance,
// and counted as expired only, not as taken up (ShareStats.Taken).
func (in *Inbox) takeUp(ctx context.Context, d *deferral, jobs *fairqueue.Queue[string, *nostr.Event], wait *backlog, refusals *refuser, late bool) {
	defer in.marks.finished(d) // a no-op once handed over
	if d.verified {
		if in.dropExpired(ctx, d.evs[0], "kept aside") {
			return
		}
		in.deferred.taken.Add(1)
		in.marks.handOver(d, d.evs[0])
		in.admitTo(ctx, d.evs[0], jobs, wait, late, refusals, late) // take saw it
		return
	}
	for _, ev := range d.evs {
		if !in.verify(ev) {
			continue
		}
		first := in.firstSight(d.id)
		if first && in.dropExpired(ctx, ev, "kept aside") {
			return
		}
		in.deferred.taken.Add(1)
		if first {
			in.marks.handOver(d, ev)
			in.admitTo(ctx, ev, jobs, wait, late, refusals, late)
		}
		return
	}
	in.deferred.taken.Add(1) // no copy verifies: taken up, and dropped as forged
}

// busy is the refusal of a request the queue has no room for.
func busy() *snap.Error {
	return &snap.Error{Code: snap.CodeServiceUnavailable, Message: "busy; try again shortly", Data: map[string]any{"retryAfter": 1}}
}

// since is where the subscription starts: the checkpoint (or now) minus
// the lookback, and each relay the checkpoint kept a point for
// (RelayCheckpoint) from that point minus the lookback, but no earlier
// than keepProcessed before the checkpoint: the ids processed before
// that are forgotten.
func (in *Inbox) since(ctx context.Context) (nostr.Timestamp, map[string]nostr.Timestamp, error) {
	at := nostr.Timestamp(in.cfg.Now().Unix())
	lookback := nostr.Timestamp(in.cfg.Lookback / time.Second)
	from := map[string]nostr.Timestamp{}
	if in.cfg.Checkpoint != nil {
		ts, err := in.cfg.Checkpoint.Since(ctx)
		if err != nil {
			return 0, nil, err
		}
		if ts > 0 {
			at = ts
		}
		if rc, ok := in.cfg.Checkpoint.(RelayCheckpoint); ok && ts > 0 {
			points, err := rc.Relays(ctx)
			if err != nil {
				return 0, nil, err
			}
			for url, p := range points {
				from[url] = max(p, ts-keepProcessed) - lookback
			}
		}
	}
	return at - lookback, from, nil
}

// reach writes each relay's point; a failure is logged: the next start
// then resumes those relays from older points, or from Since.
func (in *Inbox) reach(ctx context.Context, rc RelayCheckpoint, points map[string]nostr.Timestamp) {
	ctx, cancel := context.WithTimeout(ctx, in.cfg.StepTimeout)
	defer cancel()
	if err := rc.Reached(ctx, points); err != nil {
		in.cfg.Logger.Error("inbox checkpoint: relay points", "err", err)
	}
}

// dropExpired reports whether the NIP-40 expiration of the request ev has
// passed by the inbox's clock (it is at or before now, as relays count
// it), counting and logging it so; the caller then drops it unprocessed
// and unanswered: NIP-40 asks clients to ignore expired events, and the
// requester said it wanted nothing of the request past then. step tells
// the log where it was dropped: as it was received, or as its turn came
// in the backlog or the queue.
func (in *Inbox) dropExpired(ctx context.Context, ev *nostr.Event, step string) bool {
	exp, ok := Expiration(ev)
	if !ok {
		return false
	}
	now := in.cfg.Now()
	if int64(exp) > now.Unix() {
		return false
	}
	in.expired.Add(1)
	in.expiredLog.Log(ctx, in.cfg.Logger, now, slog.LevelInfo, "inbox: request expired (NIP-40); dropped unprocessed",
		"event", ev.ID, "peer", ev.PubKey, "expiration", exp.Time().UTC(), "step", step)
	return true
}

// Expiration returns the NIP-40 expiration of ev: the unix time of its
// first "expiration" tag. A tag whose value is not a unix time counts as
// none (relays that support NIP-40 refuse such an event). An event has
// expired once its expiration is at or before now, as relays count it.
func Expiration(ev *nostr.Event) (nostr.Timestamp, bool) {
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "expiration" {
			continue
		}
		n, ok := unixTime(t[1])
		return nostr.Timestamp(n), ok
	}
	return 0, false
}

// unixTime parses s as strconv.ParseInt(s, 10, 64) does (the embedded
// relay's reading of an expiration), reporting false where that fails or
// the value is negative; unlike it, it allocates nothing when s is not a
// number (strconv's error does).
func unixTime(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i]) - '0'
		if d < 0 || d > 9 || n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg && n != 0 {
		return 0, false
	}
	return n, true
}

func (in *Inbox) addressedToUs(ev *nostr.Event) bool {
	return (ev.Kind == relay.KindEphemeral || ev.Kind == relay.KindMessage) && hasTag(ev, "p", in.cfg.Key.NostrPublicKey())
}

// serve is handle behind a recover: a request whose handling panics (a
// library's bug that hostile input finds, as go-nostr's NIP-44 decoder
// once did with a payload of line breaks) is logged with its stack,
// refused with 5001 and recorded as processed, and the worker goes on.
// Unrecovered, one event from any key took the whole node down, which
// net/http's server does not let one request do either.
func (in *Inbox) serve(run *running, ev *nostr.Event) {
	// The marks of a request the queue held end as a worker takes it:
	// two map operations a request, on maps that are empty but for a
	// catch-up's backlog or a request taken up late.
	in.fed.Delete(ev)
	_, late := in.late.LoadAndDelete(ev)
	if in.dropExpired(run.work, ev, "queue") {
		in.marks.finished(ev)
		return
	}
	streaming := false
	// After survive: the request is finished once its answer is sent
	// (a stream's, when the stream ends).
	defer func() {
		if !streaming {
			in.marks.finished(ev)
		}
	}()
	defer in.survive(run.work, ev, late)
	streaming = in.handle(run, ev, late)
}

// survive, deferred, recovers a panic in the handling of ev (see serve). A
// late request (see snap.Inbound.Late) is not refused: the replica that
// owns it answers it.
func (in *Inbox) survive(ctx context.Context, ev *nostr.Event, late bool) {
	p := recover()
	if p == nil {
		return
	}
	in.panicLog.Log(ctx, in.cfg.Logger, in.cfg.Now(), slog.LevelError, "inbox: handling a request panicked; refused with 5001", "event", ev.ID, "peer", ev.PubKey,
		"late", late, "panic", p, "stack", string(debug.Stack()))
	defer func() {
		if p := recover(); p != nil {
			in.panicLog.Log(ctx, in.cfg.Logger, in.cfg.Now(), slog.LevelError, "inbox: refusing a request whose handling panicked panicked too", "event", ev.ID, "panic", p)
		}
	}()
	if !late {
		in.reply(ctx, ev, in.cfg.Handler.Refuse(&snap.Error{Code: snap.CodeInternal, Message: "internal error"}), false)
	}
	in.done(ctx, ev)
}

// handle answers one request event, taken up late from another replica
// when late (see snap.Inbound.Late); a streaming request is handed to a
// stream of its own, and handle reports true.
func (in *Inbox) handle(run *running, ev *nostr.Event, late bool) (streaming bool) {
	ctx := run.work
	plain, err := in.sealer.open(ev.PubKey, ev.Content)
	if err != nil {
		if late { // its owner refused it so already
			in.cfg.Logger.Debug("inbox: a late request cannot be opened; not answered", "event", ev.ID)
		} else {
			in.reply(ctx, ev, in.cfg.Handler.Refuse(&snap.Error{Code: snap.CodeInvalidMessage,
				Message: "cannot open the NIP-44 payload", Data: map[string]any{"field": "content", "reason": err.Error()}}), false)
		}
		in.done(ctx, ev)
		return
	}
	var signer [32]byte
	if _, err := relay.DecodeHex32(ev.PubKey, &signer); err != nil {
		in.done(ctx, ev)
		return // the pool verified the event; its pubkey is 32 bytes
	}
	// The event id names this delivery: a replica sharing the replay
	// store that took it already answers it, and this one stays silent.
	inbound := snap.Inbound{Raw: plain, Signer: &signer, Via: ev.ID, Transport: "nostr", MaxSize: relay.MaxNIP44Plain, Late: late}
	if snap.IsStreamRequest(plain) {
		select {
		case in.slots <- struct{}{}:
		default:
			if !late {
				in.reply(ctx, ev, in.cfg.Handler.Refuse(&snap.Error{Code: snap.CodeServiceUnavailable,
					Message: "too many streams; try again shortly", Data: map[string]any{"retryAfter": 5}}), false)
			}
			in.done(ctx, ev)
			return
		}
		run.streams.Go(func() {
			defer in.marks.finished(ev)
			defer func() { <-in.slots }()
			defer in.survive(ctx, ev, late)
			in.stream(run, ev, inbound)
			in.done(ctx, ev)
		})
		return true
	}
	in.answer(ctx, ev, in.cfg.Handler.Serve(ctx, inbound, nil), late)
	in.done(ctx, ev)
	return false
}

// stream answers a streaming request: each event is published as it comes,
// the final response last. The handler's context ends with Run's; the
// answers are published on the work context.
//
// A late delivery is claimed (see claim) before its first event, not at
// its final answer: its owner may have answered it meanwhile (a refusal,
// recorded as it was sent), and the requester would get that answer and
// this stream's events. When the claim is lost the stream ends there and
// nothing of it is published; when it is won the final answer goes out
// without a second claim.
func (in *Inbox) stream(run *running, req *nostr.Event, inbound snap.Inbound) {
	claimed, lost := !inbound.Late, false // send runs in one goroutine at a time, before Serve returns
	resp := in.cfg.Handler.Serve(run.stop, inbound, func(ev *snap.Message) error {
		if !claimed {
			if !in.claim(run.work, req, ev, true) {
				lost = true
				return errAnswered
			}
			claimed = true
		}
		return in.publish(run.work, req, ev)
	})
	switch {
	case lost:
		in.cfg.Logger.Debug("inbox: a late stream's request was answered by another replica; stream not sent", "event", req.ID)
	case inbound.Late && claimed && resp != nil:
		in.publishAnswer(run.work, req, resp)
	default:
		in.answer(run.work, req, resp, inbound.Late)
	}
}

// errAnswered ends a late stream whose request another replica answered.
var errAnswered = errors.New("snapnostr: the request was answered by another replica")

// answer publishes resp, when there is one, to req, late or not.
func (in *Inbox) answer(ctx context.Context, req *nostr.Event, resp *snap.Message, late bool) {
	if resp == nil {
		in.cfg.Logger.Debug("inbox: not a request, or a delivery already taken; no answer", "event", req.ID)
		return
	}
	in.reply(ctx, req, resp, late)
}

// done records a stored request as processed. A created_at in the future
// counts as now, as the pool's resume points do: the checkpoint's
// newest is where the next start subscribes from, so a forged far-future
// event would otherwise have it miss every request dated before.
//
// done runs after the request was answered, so a panic in it (the
// checkpoint's store) is recovered and logged here: survive would
// otherwise refuse with 5001 a request its requester already has the
// answer to. The request is then not recorded, and a restart's catch-up
// meets it again, where the replay store stops it.
func (in *Inbox) done(ctx context.Context, ev *nostr.Event) {
	if ev.Kind != relay.KindMessage || in.cfg.Checkpoint == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			in.cfg.Logger.Error("inbox: recording a request as processed panicked", "event", ev.ID,
				"panic", p, "stack", string(debug.Stack()))
		}
	}()
	at := min(ev.CreatedAt, nostr.Timestamp(in.cfg.Now().Unix()))
	ctx, cancel := context.WithTimeout(ctx, in.cfg.StepTimeout)
	defer cancel()
	if err := in.cfg.Checkpoint.Done(ctx, ev.ID, at); err != nil {
		in.cfg.Logger.Error("inbox checkpoint", "event", ev.ID, "err", err)
	}
}

// reply seals resp for the requester of req (a late delivery when late)
// and publishes it, unless another process answers req (claim); a
// failure is logged.
func (in *Inbox) reply(ctx context.Context, req *nostr.Event, resp *snap.Message, late bool) {
	if in.claim(ctx, req, resp, late) {
		in.publishAnswer(ctx, req, resp)
	}
}

// publishAnswer publishes resp, the answer to req that this process
// sends; a failure is logged.
func (in *Inbox) publishAnswer(ctx context.Context, req *nostr.Event, resp *snap.Message) {
	if err := in.publish(ctx, req, resp); err != nil {
		in.unpublishedLog.Log(ctx, in.cfg.Logger, in.cfg.Now(), slog.LevelError, "inbox: reply not published", "request", req.ID, "method", resp.Method, "type", resp.Type, "err", err)
		return
	}
	in.logAnswered(ctx, req, resp)
}

// claim reports whether this process sends resp, its answer to req (a
// late delivery when late). An answer that may have no replay record
// naming its delivery — an error, or any answer to a late delivery — is
// sent only if this process records the delivery first (see
// InboxConfig.Replay): another replica receiving the same event may
// answer it too (it took it up late, finding no record of it, or both
// counted it their share for a moment), and the requester gets one
// answer. A store that fails lets the answer go: better two answers than
// none.
func (in *Inbox) claim(ctx context.Context, req *nostr.Event, resp *snap.Message, late bool) bool {
	if in.cfg.Replay == nil || in.cfg.Shares == nil || !late && resp.ErrorCode() == 0 {
		return true
	}
	now := in.cfg.Now()
	rec := snap.ReplayRecord{FirstSeen: now, Expires: now.Add(max(snap.MinReplayRetention, 2*in.cfg.Shares.Grace())),
		Fingerprint: sha256.Sum256([]byte(req.ID)), Via: req.ID}
	ctx, cancel := context.WithTimeout(ctx, in.cfg.StepTimeout)
	defer cancel()
	_, first, err := in.cfg.Replay.Remember(ctx, AnswerFrom, req.ID, rec)
	switch {
	case err != nil:
		in.cfg.Logger.Warn("inbox: answer not recorded; sent all the same", "request", req.ID, "err", err)
		return true
	case !first:
		in.cfg.Logger.Debug("inbox: another replica answered the request; not answered", "request", req.ID, "late", late)
		return false
	}
	return true
}

// logAnswered logs an answer at debug level. The level is asked first:
// the arguments of a call not logged would still be put in interfaces,
// a handful of allocations on every round trip.
func (in *Inbox) logAnswered(ctx context.Context, req *nostr.Event, resp *snap.Message) {
	if in.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		in.cfg.Logger.DebugContext(ctx, "inbox: answered", "request", req.ID, "method", resp.Method, "type", resp.Type, "to", resp.To)
	}
}

// replyTime dates a reply to req: now, or the request's created_at when
// that is later, up to MaxDrift ahead. A requester listens for its
// replies from a few seconds before it sent (SDK peers and the client 5
// s, relay filters and their own checks applying since), by its own
// clock: a reply dated by a clock that trails the requester's, within the
// SNAP window, would never reach it.
func (in *Inbox) replyTime(req *nostr.Event) nostr.Timestamp {
	now := in.cfg.Now()
	at := nostr.Timestamp(now.Unix())
	return max(at, min(req.CreatedAt, nostr.Timestamp(now.Add(in.cfg.MaxDrift).Unix())))
}

// publish seals m (a response or a stream event) for the requester of req
// and publishes it as the same kind, tagged p (requester) and e (request).
func (in *Inbox) publish(ctx context.Context, req *nostr.Event, m *snap.Message) error {
	plain, err := m.MarshalJSON()
	if err != nil {
		return fmt.Errorf("snapnostr: %s does not serialize: %w", m.Type, err)
	}
	content, err := in.sealer.seal(req.PubKey, plain)
	if err != nil {
		return fmt.Errorf("snapnostr: %s cannot be sealed: %w", m.Type, err)
	}
	at := in.replyTime(req)
	ev := nostr.Event{
		PubKey: in.cfg.Key.NostrPublicKey(), CreatedAt: at, Kind: req.Kind,
		Tags: nostr.Tags{{"p", req.PubKey}, {"e", req.ID}}, Content: content,
	}
	if req.Kind == relay.KindMessage {
		ev.Tags = append(ev.Tags, nostr.Tag{"expiration", strconv.FormatInt(int64(at)+ttlSeconds(in.cfg.ReplyTTL), 10)})
	}
	if err := in.cfg.Verifier.Sign(in.cfg.Key, &ev); err != nil {
		return fmt.Errorf("snapnostr: sign %s: %w", m.Type, err)
	}
	if res, err := in.cfg.Transport.Publish(ctx, ev); err != nil {
		return fmt.Errorf("snapnostr: publish %s (%v): %w", m.Type, res, err)
	}
	return nil
}

// ttlSeconds is d in whole seconds, rounded up: the NIP-40 expiration of
// a reply dated at is at+ttlSeconds(ReplyTTL), never at itself (an event
// expired as it is published) nor before ReplyTTL has passed.
func ttlSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}
