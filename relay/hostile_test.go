package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/fakerelay"
	"github.com/snapnode/snapnode/internal/testutil"
)

// hostileRelay is a WebSocket server that speaks NIP-01 badly: it hands
// every frame it reads to its script, which may write anything back.
type hostileRelay struct {
	url string
}

// newHostileRelay starts a hostile relay playing script (see
// fakerelay.Script), stopped when t ends.
func newHostileRelay(t *testing.T, script fakerelay.Script) *hostileRelay {
	t.Helper()
	return &hostileRelay{url: fakerelay.Serve(t, script)}
}

// silent reads and answers nothing: no OK, no EOSE.
func silent([]byte, func([]byte) error) {}

// A relay that takes events and never answers OK no longer holds up a
// publication another relay accepted: Publish waited for every relay's
// answer, so each of the inbox's replies held its worker for the whole
// PublishTimeout (10 s), and with 8 workers one such relay among the
// node's let it answer under one request a second.
func TestPublishDoesNotWaitForASilentRelay(t *testing.T) {
	good := newITRelay(t)
	bad := newHostileRelay(t, silent)
	p := NewPool(PoolConfig{URLs: []string{good.url, bad.url}, Logger: ptLogger(), PublishTimeout: time.Hour})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "both relays connected", func() bool {
		return itState(p, good.url) == StateConnected && itState(p, bad.url) == StateConnected
	})
	type result struct {
		res PublishResult
		err error
	}
	done := make(chan result, 1)
	ev := ptEvent(t, ptNow(), "reply")
	go func() {
		res, err := p.Publish(context.Background(), *ev)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if o := r.res.Relays; r.res.Accepted() != 1 || !o[0].OK || o[1].OK || !errors.Is(o[1].Err, ErrAnswerPending) {
			t.Fatalf("outcomes %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits for the relay that never answers, another having accepted")
	}
	// The answers still awaited are bounded: past MaxPendingAnswers the
	// relay is no longer awaited.
	for i := range MaxPendingAnswers + 10 {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), fmt.Sprint("reply ", i)))
		if err != nil || !errors.Is(res.Relays[1].Err, ErrAnswerPending) {
			t.Fatalf("publication %d: %v, %+v", i, err, res.Relays)
		}
	}
	if n := p.relays[1].pendingAnswers.Load(); n != MaxPendingAnswers {
		t.Fatalf("%d answers awaited, want %d", n, MaxPendingAnswers)
	}
	p.Close() // stops them
	if n := p.relays[1].pendingAnswers.Load(); n != 0 {
		t.Fatalf("%d answers awaited after Close", n)
	}
}

// logBytes is a slog handler that counts what it would write.
type logBytes struct {
	mu    sync.Mutex
	n     int
	lines int
	buf   bytes.Buffer
	inner slog.Handler
}

func newLogBytes() *logBytes {
	l := &logBytes{}
	l.inner = slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return l
}

func (l *logBytes) Enabled(context.Context, slog.Level) bool { return true }
func (l *logBytes) WithAttrs(as []slog.Attr) slog.Handler {
	return &logAttrs{l: l, h: l.inner.WithAttrs(as)}
}
func (l *logBytes) WithGroup(string) slog.Handler { return l }
func (l *logBytes) Handle(ctx context.Context, r slog.Record) error {
	return l.handle(ctx, l.inner, r)
}

func (l *logBytes) handle(ctx context.Context, h slog.Handler, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Level < slog.LevelInfo {
		return nil // what an operator's default level writes
	}
	before := l.buf.Len()
	err := h.Handle(ctx, r)
	l.n += l.buf.Len() - before
	l.lines++
	if l.buf.Len() > 1<<20 {
		l.buf.Reset()
	}
	return err
}

func (l *logBytes) written() (bytes, lines int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.lines
}

type logAttrs struct {
	l *logBytes
	h slog.Handler
}

func (a *logAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (a *logAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &logAttrs{l: a.l, h: a.h.WithAttrs(as)}
}
func (a *logAttrs) WithGroup(string) slog.Handler { return a }
func (a *logAttrs) Handle(ctx context.Context, r slog.Record) error {
	return a.l.handle(ctx, a.h, r)
}

// floodAfterREQ answers the first REQ with what flood writes, then a
// valid event for the subscription: once it is delivered, the pool has
// read the whole flood.
func floodAfterREQ(t *testing.T, sentinel *nostr.Event, flood func(sub string, write func([]byte) error) error) *hostileRelay {
	var once sync.Once
	return newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			if err := flood(req.SubscriptionID, write); err != nil {
				return
			}
			b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: *sentinel}.MarshalJSON()
			_ = write(b)
		})
	})
}

func awaitEvent(t *testing.T, sub *Subscription, want *nostr.Event) {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok || ev.ID != want.ID {
			t.Fatalf("got %v (%v), want the sentinel", ev, sub.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sentinel event was not delivered")
	}
}

// A relay's NOTICE and CLOSED messages are logged cut short and at a
// bounded rate: a relay that sent thousands of them, each as long as its
// frame may be, had each logged whole, at info or warn, an operator's log
// filling at the speed of the relay's connection.
func TestRelayTalkLoggedBounded(t *testing.T) {
	const n, size = 300, 60 << 10
	text := "\x1b[2J\x1b]0;owned\x07" + strings.Repeat("A", size)
	sentinel := ptEvent(t, ptNow(), "sentinel")
	bad := floodAfterREQ(t, sentinel, func(sub string, write func([]byte) error) error {
		for i := range n {
			frames := []interface{ MarshalJSON() ([]byte, error) }{
				nostr.NoticeEnvelope(text),
				nostr.ClosedEnvelope{SubscriptionID: "never-opened", Reason: text},
				nostr.ClosedEnvelope{SubscriptionID: sub, Reason: "blocked: " + text}, // for good: not asked again
			}
			for _, f := range frames[i%3 : i%3+1] {
				b, _ := f.MarshalJSON()
				if err := write(b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	logs := newLogBytes()
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: slog.New(logs)})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, sentinel)
	written, lines := logs.written()
	if written > 64<<10 || lines > 100 {
		t.Fatalf("%d lines, %d bytes logged for %d messages of %d bytes", lines, written, n, len(text))
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if bytes.ContainsAny(logs.buf.Bytes(), "\x1b\x07") {
		t.Fatal("a terminal escape was logged raw")
	}
}

// A relay that answers CLOSED again and again for an open subscription
// has it asked again once, not once per CLOSED: each CLOSED started a
// timer of its own, held until the backoff passed (up to BackoffMax).
func TestClosedFloodHoldsOneRetry(t *testing.T) {
	const n = 50_000
	sentinel := ptEvent(t, ptNow(), "sentinel")
	bad := floodAfterREQ(t, sentinel, func(sub string, write func([]byte) error) error {
		b, _ := nostr.ClosedEnvelope{SubscriptionID: sub, Reason: "rate-limited: slow down"}.MarshalJSON()
		for range n {
			if err := write(b); err != nil {
				return err
			}
		}
		return nil
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), BackoffMax: time.Hour})
	p.Start(t.Context())
	defer p.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, sentinel)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 2<<20 {
		t.Fatalf("the heap grew by %d bytes after %d CLOSED for one subscription", grew, n)
	}
}

// What a hostile relay sends for a subscription reaches it only if it is
// an event the subscription asked for, with a valid id and signature,
// and once: events for subscriptions never opened, outside the filter
// (another kind, another p tag), forged, or sent thousands of times.
func TestHostileRelayEventsFiltered(t *testing.T) {
	sentinel := ptEvent(t, ptNow(), "sentinel")
	good := ptEvent(t, ptNow(), "good")
	wrongKind := &nostr.Event{CreatedAt: ptNow(), Kind: 1, Tags: nostr.Tags{{"p", ptPub}}, Content: "kind 1"}
	wrongP := &nostr.Event{CreatedAt: ptNow(), Kind: KindMessage, Tags: nostr.Tags{{"p", strings.Repeat("ab", 32)}}, Content: "not for us"}
	for _, ev := range []*nostr.Event{wrongKind, wrongP} {
		if err := ev.Sign(ptSecret); err != nil {
			t.Fatal(err)
		}
	}
	forged := *ptEvent(t, ptNow(), "forged")
	forged.Sig = testutil.FlipHex(forged.Sig)
	badID := *ptEvent(t, ptNow(), "bad id")
	badID.Content = "changed"
	bad := floodAfterREQ(t, sentinel, func(sub string, write func([]byte) error) error {
		other := "never-opened"
		send := func(id *string, ev nostr.Event) error {
			b, _ := nostr.EventEnvelope{SubscriptionID: id, Event: ev}.MarshalJSON()
			return write(b)
		}
		for _, ev := range []nostr.Event{*wrongKind, *wrongP, forged, badID} {
			if err := send(&sub, ev); err != nil {
				return err
			}
		}
		for range 5000 {
			if err := send(&sub, *good); err != nil {
				return err
			}
			if err := send(&other, *good); err != nil {
				return err
			}
		}
		return nil
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, good)
	awaitEvent(t, sub, sentinel)
	if st := p.Health()[0]; st.EventsInvalid != 2 || st.EventsMismatch != 2 || st.EventsReceived != 10005 {
		t.Fatalf("health %+v", st)
	}
}
