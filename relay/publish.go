package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// RelayOutcome is what one relay did with a published event.
type RelayOutcome struct {
	URL     string
	OK      bool   // the relay answered OK true
	Message string // the relay's OK message, if any
	Err     error  // nil when OK; else ErrNotConnected, ErrRejected or a transport error
}

// PublishResult gathers the outcome of a Publish on every relay, in the
// order of PoolConfig.URLs.
type PublishResult struct {
	EventID string
	Relays  []RelayOutcome
}

// Accepted returns how many relays answered OK true.
func (r PublishResult) Accepted() int {
	n := 0
	for _, o := range r.Relays {
		if o.OK {
			n++
		}
	}
	return n
}

// Publish sends ev, which must verify, to every connected relay (and to
// each relay that connects while their answers are awaited) and waits
// for their OKs (bounded by ctx, or PublishTimeout when ctx has no
// deadline). When no relay is connected yet it waits, within the same
// bound, for one to connect. It succeeds when at least one relay answers
// OK true, and returns as soon as one has and no other has answered yet:
// a relay that is slow to answer, or never does, holds up no publication
// another relay took (the event was sent to it all the same). Such a
// relay's outcome is ErrAnswerPending; it is still awaited, within the
// same bound, and logged when it comes (at most MaxPendingAnswers awaited
// so per relay; past that it is no longer awaited). The outcome of each
// relay is returned and logged either way.
func (p *Pool) Publish(ctx context.Context, ev nostr.Event) (PublishResult, error) {
	res := PublishResult{EventID: ev.ID}
	if err := p.cfg.Verifier.Verify(&ev); err != nil {
		return res, fmt.Errorf("relay: publish: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.PublishTimeout)
		defer cancel()
	}
	res.Relays = make([]RelayOutcome, len(p.relays))
	conns, err := p.awaitConnected(ctx)
	if err != nil {
		for i, r := range p.relays {
			res.Relays[i] = RelayOutcome{URL: r.url, Err: ErrNotConnected}
		}
		return res, fmt.Errorf("relay: publish %s: %w", ev.ID, err)
	}
	// With one relay connected that no other can join (the pool's only
	// relay), or one in this process (the node's own, most often), the
	// event is published from this goroutine: a goroutine started and
	// waited for would cost two wake-ups per event and gain nothing.
	// Otherwise a relay that connects while the others' answers are
	// awaited is given the event too (see publishAll).
	var only Conn
	connected := 0
	for _, c := range conns {
		if c != nil {
			only = c
			connected++
		}
	}
	_, inProcess := only.(InProcessConn)
	alone := connected == 1 && (len(p.relays) == 1 || inProcess)
	for i, r := range p.relays {
		res.Relays[i].URL = r.url
		switch c := conns[i]; {
		case c == nil:
			res.Relays[i].Err = ErrNotConnected
		case alone:
			publishTo(ctx, c, &ev, &res.Relays[i])
		}
	}
	if !alone {
		p.publishAll(ctx, &ev, conns, res.Relays)
	}
	var errs []error
	for i, o := range res.Relays {
		p.logOutcome(ctx, p.relays[i], &ev, o)
		if !o.OK {
			errs = append(errs, fmt.Errorf("%s: %w", o.URL, o.Err))
		}
	}
	if res.Accepted() == 0 {
		return res, fmt.Errorf("relay: publish %s: %w: %w", ev.ID, ErrNotAccepted, errors.Join(errs...))
	}
	return res, nil
}

// MaxPendingAnswers bounds the publications whose OK a relay is still
// awaited for after Publish returned (see Publish): each holds its event
// and a goroutine until the relay answers or the publication's bound
// passes.
const MaxPendingAnswers = 64

// ErrAnswerPending is the outcome of a relay that had not answered a
// publication when another relay accepted it and Publish returned.
var ErrAnswerPending = errors.New("relay had not answered when another accepted the event")

// publishTo publishes ev on c and records the relay's answer in o.
func publishTo(ctx context.Context, c Conn, ev *nostr.Event, o *RelayOutcome) {
	ok, msg, err := c.Publish(ctx, *ev)
	o.OK, o.Message = ok && err == nil, msg
	switch {
	case err != nil:
		o.Err = err
	case !ok:
		o.Err = fmt.Errorf("%w: %s", ErrRejected, msg)
	}
}

// pendingPublish is one relay's publication in publishAll.
type pendingPublish struct {
	cancel context.CancelFunc
	out    RelayOutcome

	mu       sync.Mutex
	answered bool // out is final
	detached bool // Publish returned: the goroutine logs out itself
	dropped  bool // another relay accepted, and this one is not awaited
	stop     func() bool
}

// publishAll publishes ev on every relay of conns at once, and on each
// relay that connects meanwhile, and fills outs with their outcomes. It
// returns once every relay it published on has answered, ctx has ended,
// or one relay accepted ev: those still waiting for their answer then go
// on (at most MaxPendingAnswers a relay) and log it when it comes. A
// relay that connects while the others' answers are awaited takes the
// event too: the relays connected when Publish began may never answer
// (a relay may take events and stall), and the publication would wait
// out its bound and fail, the relay that came meanwhile never sent it.
func (p *Pool) publishAll(ctx context.Context, ev *nostr.Event, conns []Conn, outs []RelayOutcome) {
	deadline, _ := ctx.Deadline()
	answered := make(chan int, len(conns)) // never blocks a sender
	pending := make([]*pendingPublish, len(conns))
	waiting := 0
	var wg sync.WaitGroup // the publications not detached
	start := func(i int, c Conn) {
		// Not ctx's child: a detached publication outlives ctx's
		// cancellation, never its deadline.
		pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		w := &pendingPublish{cancel: cancel, out: RelayOutcome{URL: outs[i].URL}}
		pending[i] = w
		waiting++
		r := p.relays[i]
		wg.Add(1)
		go func() {
			publishTo(pctx, c, ev, &w.out)
			cancel()
			w.mu.Lock()
			w.answered = true
			detached, stop := w.detached, w.stop
			w.mu.Unlock()
			if !detached {
				answered <- i
				wg.Done()
				return
			}
			stop()
			p.logOutcome(context.Background(), r, ev, w.out)
			r.pendingAnswers.Add(-1)
			p.detached.Done()
		}()
	}
	// joined starts the publication on each relay connected now that has
	// none yet; the wake it returns is closed when another connects.
	joined := func() <-chan struct{} {
		p.mu.Lock()
		wake := p.wake
		p.mu.Unlock()
		for i, r := range p.relays {
			if pending[i] != nil {
				continue
			}
			var c Conn
			r.mu.Lock()
			if r.publishing {
				c = r.conn
			}
			r.mu.Unlock()
			if c != nil {
				start(i, c)
			}
		}
		return wake
	}
	for i, c := range conns {
		if c != nil {
			start(i, c)
		}
	}
	wake := joined()
	accepted := false
	for waiting > 0 && !accepted {
		select {
		case i := <-answered:
			waiting--
			outs[i] = pending[i].out
			accepted = pending[i].out.OK
		case <-wake:
			wake = joined()
		case <-ctx.Done():
			for _, w := range pending {
				if w != nil {
					w.cancel() // ctx's cause is read by each below
				}
			}
			waiting = 0
		}
	}
	for i, w := range pending {
		if w == nil {
			continue
		}
		w.mu.Lock()
		if !w.answered && accepted {
			w.stop, w.detached = p.detach(p.relays[i], w.cancel)
		}
		switch {
		case w.detached:
			outs[i] = RelayOutcome{URL: outs[i].URL, Err: ErrAnswerPending}
			wg.Done()
		case !w.answered:
			w.dropped = accepted
			w.cancel()
		}
		w.mu.Unlock()
	}
	wg.Wait()
	for i, w := range pending {
		if w == nil || w.detached {
			continue
		}
		outs[i] = w.out
		switch {
		case w.out.OK, w.out.Err == nil, !errors.Is(w.out.Err, context.Canceled):
		case w.dropped:
			outs[i].Err = fmt.Errorf("%w; not awaited: %d publications await it already", ErrAnswerPending, MaxPendingAnswers)
		case ctx.Err() != nil:
			outs[i].Err = fmt.Errorf("relay: %s: no OK for %s: %w", outs[i].URL, ev.ID, context.Cause(ctx))
		}
	}
}

// detach reports whether a publication still awaiting r's answer may go
// on after Publish returns: fewer than MaxPendingAnswers of r's are, and
// the pool is open. Close then cancels it (cancel) and waits for it;
// stop, called when it ends, forgets cancel.
func (p *Pool) detach(r *poolRelay, cancel context.CancelFunc) (stop func() bool, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || r.pendingAnswers.Load() >= MaxPendingAnswers {
		return nil, false
	}
	r.pendingAnswers.Add(1)
	p.detached.Add(1) // under p.mu, before Close waits
	return context.AfterFunc(p.life, cancel), true
}

// logOutcome logs relay r's outcome of publishing ev.
func (p *Pool) logOutcome(ctx context.Context, r *poolRelay, ev *nostr.Event, o RelayOutcome) {
	switch {
	case o.OK:
		if p.log.Enabled(ctx, slog.LevelDebug) { // else its arguments are still boxed, on every publish
			p.log.DebugContext(ctx, "relay pool: published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind)
		}
	case errors.Is(o.Err, ErrNotConnected), errors.Is(o.Err, ErrAnswerPending): // its connection loop already logs why; logged when it comes
		p.log.Debug("relay pool: not published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind, "err", o.Err)
	default:
		// Counted each, logged at most logcap.PerMinute a minute a relay: a
		// relay may refuse every publication.
		r.publishFailed.Add(1)
		r.logLimited(&r.failures, slog.LevelWarn, "relay pool: publish failed", "event", ev.ID, "kind", ev.Kind, "err", o.Err)
	}
}

// awaitConnected returns the current connection of each relay (nil when
// not connected), waiting until ctx ends for at least one.
func (p *Pool) awaitConnected(ctx context.Context) ([]Conn, error) {
	for {
		p.mu.Lock()
		closed, wake := p.closed, p.wake
		p.mu.Unlock()
		if closed {
			return nil, ErrPoolClosed
		}
		conns := make([]Conn, len(p.relays))
		some := false
		for i, r := range p.relays {
			r.mu.Lock()
			if r.publishing {
				conns[i] = r.conn
			}
			r.mu.Unlock()
			some = some || conns[i] != nil
		}
		if some {
			return conns, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoRelays, context.Cause(ctx))
		}
	}
}

func (p *Pool) wakeWaiters() {
	p.mu.Lock()
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}
