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

// Publish sends ev, which must verify, to every connected relay and waits
// for their OKs (bounded by ctx, or PublishTimeout when ctx has no
// deadline). When no relay is connected yet it waits, within the same
// bound, for one to connect. It succeeds when at least one relay answers
// OK true; the outcome of each relay is returned and logged either way.
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
	publish := func(c Conn, o *RelayOutcome) {
		ok, msg, err := c.Publish(ctx, ev)
		o.OK, o.Message = ok && err == nil, msg
		switch {
		case err != nil:
			o.Err = err
		case !ok:
			o.Err = fmt.Errorf("%w: %s", ErrRejected, msg)
		}
	}
	// With one relay connected (the node's own, most often) the event is
	// published from this goroutine: a goroutine started and waited for
	// would cost two wake-ups per event and gain nothing.
	connected := 0
	for _, c := range conns {
		if c != nil {
			connected++
		}
	}
	var wg sync.WaitGroup
	for i, r := range p.relays {
		res.Relays[i].URL = r.url
		c := conns[i]
		switch {
		case c == nil:
			res.Relays[i].Err = ErrNotConnected
		case connected == 1:
			publish(c, &res.Relays[i])
		default:
			wg.Go(func() { publish(c, &res.Relays[i]) })
		}
	}
	wg.Wait()
	var errs []error
	for _, o := range res.Relays {
		switch {
		case o.OK:
			if p.log.Enabled(ctx, slog.LevelDebug) { // else its arguments are still boxed, on every publish
				p.log.DebugContext(ctx, "relay pool: published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind)
			}
			continue
		case errors.Is(o.Err, ErrNotConnected): // its connection loop already logs why
			p.log.Debug("relay pool: not published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind, "err", o.Err)
		default:
			p.log.Warn("relay pool: publish failed", "relay", o.URL, "event", ev.ID, "kind", ev.Kind, "err", o.Err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", o.URL, o.Err))
	}
	if res.Accepted() == 0 {
		return res, fmt.Errorf("relay: publish %s: %w: %w", ev.ID, ErrNotAccepted, errors.Join(errs...))
	}
	return res, nil
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
