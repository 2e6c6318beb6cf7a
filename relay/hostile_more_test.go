package relay

import (
	"context"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// Events outside a subscription's filter are dropped before their id is
// hashed or their signature checked: a relay that ignores the filter (or
// floods the node with other kinds, other p tags) costs a comparison an
// event, not a signature check.
func TestOffFilterEventsDroppedBeforeVerifying(t *testing.T) {
	const n = 500
	sentinel := ptEvent(t, ptNow(), "sentinel")
	bad := floodAfterREQ(t, sentinel, func(sub string, write func([]byte) error) error {
		for i := range n {
			// Unsigned, so checking it would count it invalid.
			ev := nostr.Event{ID: strings.Repeat("ab", 32), PubKey: ptPub, Sig: strings.Repeat("cd", 64),
				CreatedAt: ptNow(), Kind: 1, Tags: nostr.Tags{{"p", ptPub}}, Content: "other kind"}
			if i%2 == 1 {
				ev.Kind, ev.Tags = KindMessage, nostr.Tags{{"p", strings.Repeat("ef", 32)}}
			}
			b, _ := nostr.EventEnvelope{SubscriptionID: &sub, Event: ev}.MarshalJSON()
			if err := write(b); err != nil {
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
	awaitEvent(t, sub, sentinel)
	if st := p.Health()[0]; st.EventsMismatch != n || st.EventsInvalid != 0 {
		t.Fatalf("%d events outside the filter: %d counted mismatched, %d invalid (checked first)", n, st.EventsMismatch, st.EventsInvalid)
	}
}

// A forged copy of an event (its id, other content or another signature)
// from a hostile relay does not mark the id delivered: the genuine event,
// from another relay, is still taken.
func TestForgedCopyDoesNotShadowTheGenuine(t *testing.T) {
	good := newITRelay(t)
	genuine := ptEvent(t, ptNow(), "genuine")
	otherContent := *genuine
	otherContent.Content = "forged"
	otherSig := *genuine
	otherSig.Sig = testutil.FlipHex(genuine.Sig)
	var once sync.Once
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			for _, ev := range []nostr.Event{otherContent, otherSig, otherContent} {
				b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: ev}.MarshalJSON()
				_ = write(b)
			}
			b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
			_ = write(b)
		})
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url, good.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	itWaitFor(t, "the forged copies", func() bool { return ptStatus(p, bad.url).EventsInvalid == 3 })
	itWaitFor(t, "the good relay", func() bool { return itState(p, good.url) == StateConnected })
	if _, err := p.Publish(context.Background(), *genuine); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, genuine)
}

// A relay that refuses every publication (OK false) costs the node none:
// each is taken by the other relay; the refusals are counted in the
// relay's health and logged at a bounded rate, not a warning an event.
func TestRefusingRelayLoggedBounded(t *testing.T) {
	const n = 200
	good := newITRelay(t)
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		if env, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
			b, _ := nostr.OKEnvelope{EventID: env.Event.ID, OK: false, Reason: "blocked: pay first"}.MarshalJSON()
			_ = write(b)
		}
	})
	logs := newLogBytes()
	p := NewPool(PoolConfig{URLs: []string{bad.url, good.url}, Logger: slog.New(logs)})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "both relays connected", func() bool {
		return itState(p, good.url) == StateConnected && itState(p, bad.url) == StateConnected
	})
	_, before := logs.written()
	for i := range n {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), fmt.Sprint("reply ", i)))
		if err != nil || !res.Relays[1].OK {
			t.Fatalf("publication %d: %v, %+v", i, err, res.Relays)
		}
	}
	itWaitFor(t, "every refusal counted", func() bool { return ptStatus(p, bad.url).PublishFailed == n })
	if st := ptStatus(p, good.url); st.PublishFailed != 0 {
		t.Fatalf("the good relay: %d failed", st.PublishFailed)
	}
	if _, after := logs.written(); after-before > logcap.PerMinute {
		t.Fatalf("%d lines logged for %d refusals", after-before, n)
	}
}

// muteRelay accepts WebSocket connections and never reads from them: the
// node's writes fill the socket's buffers, then block.
func muteRelay(t *testing.T) (url string, conns func() int) {
	t.Helper()
	var (
		mu   sync.Mutex
		n    int
		held []*websocket.Conn
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		n++
		held = append(held, ws)
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		<-done
	}))
	t.Cleanup(func() {
		close(done)
		mu.Lock()
		for _, ws := range held {
			ws.Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http"), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A relay that accepts the connection and never reads holds up none of
// the node's publications (the other relay takes each), and its
// connection is dropped once its write queue is full rather than grow:
// the node dials it again with its back-off.
func TestRelayThatNeverReads(t *testing.T) {
	good := newITRelay(t)
	mute, dials := muteRelay(t)
	p := NewPool(PoolConfig{URLs: []string{mute, good.url}, Logger: ptLogger(), BackoffBase: time.Hour})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "both relays connected", func() bool {
		return itState(p, good.url) == StateConnected && itState(p, mute) == StateConnected
	})
	big := strings.Repeat("x", 64<<10)
	for i := 0; itState(p, mute) == StateConnected; i++ {
		if i > 2*wsWriteQueue+1000 {
			t.Fatalf("%d publications and the relay that reads none is still connected", i)
		}
		start := time.Now()
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), fmt.Sprint(i, big)))
		if err != nil || !res.Relays[1].OK {
			t.Fatalf("publication %d: %v, %+v", i, err, res.Relays)
		}
		if d := time.Since(start); d > DefaultPublishTimeout/2 {
			t.Fatalf("publication %d took %s", i, d)
		}
	}
	st := ptStatus(p, mute)
	if st.State != StateBackoff || st.LastError == nil || dials() != 1 {
		t.Fatalf("the relay that never reads: %+v, %d dials", st, dials())
	}
	t.Logf("dropped: %v", st.LastError)
	if itState(p, good.url) != StateConnected {
		t.Fatal("the good relay was held up")
	}
}

// A relay's chatter that the pool has no use for costs nothing held: AUTH
// challenges (NIP-42, which the pool does not do) by the thousand, EOSE
// twice, EOSE, CLOSED and OK for what was never asked. The pool answers
// none of it, its subscription carries on, and its EOSE is closed once.
func TestRelayChatterIgnored(t *testing.T) {
	const n = 20_000
	sentinel := ptEvent(t, ptNow(), "sentinel")
	var (
		mu     sync.Mutex
		frames []string
	)
	var once sync.Once
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		mu.Lock()
		frames = append(frames, string(frame))
		mu.Unlock()
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			sub := req.SubscriptionID
			eose, _ := nostr.EOSEEnvelope(sub).MarshalJSON()
			for _, b := range [][]byte{eose, eose, []byte(`["EOSE","never-opened"]`), []byte(`["CLOSED","never-opened",""]`)} {
				if write(b) != nil {
					return
				}
			}
			for i := range n {
				challenge := fmt.Sprint(`["AUTH","challenge-`, i, `"]`)
				ok := fmt.Sprintf(`["OK","%064x",true,""]`, i)
				if write([]byte(challenge)) != nil || write([]byte(ok)) != nil {
					return
				}
			}
			b, _ := nostr.EventEnvelope{SubscriptionID: &sub, Event: *sentinel}.MarshalJSON()
			_ = write(b)
		})
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), EOSETimeout: time.Hour})
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
	select {
	case <-sub.EOSE():
	default:
		t.Fatal("EOSE not closed")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 2<<20 {
		t.Fatalf("the heap grew by %d bytes after %d AUTH and OK messages", grew, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(frames) != 1 || sub.Err() != nil || ptStatus(p, bad.url).Reconnects != 0 {
		t.Fatalf("the pool sent %q, sub %v, health %+v", frames, sub.Err(), ptStatus(p, bad.url))
	}
}

// A relay's frame over 1 MiB (here 16 MiB) closes the connection when its
// header is read, before its payload is: the node holds none of it.
func TestRelayHugeFrameRefused(t *testing.T) {
	huge := []byte(`["NOTICE","` + strings.Repeat("A", 16<<20) + `"]`) // before the count below
	var once sync.Once
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		if _, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope); ok {
			once.Do(func() { _ = write(huge) })
		}
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), BackoffBase: time.Hour})
	p.Start(t.Context())
	defer p.Close()
	var before, peak runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := p.Subscribe(t.Context(), ptFilter()); err != nil {
		t.Fatal(err)
	}
	itWaitFor(t, "the connection dropped", func() bool { return itState(p, bad.url) == StateBackoff })
	runtime.ReadMemStats(&peak) // no GC: what was allocated is still counted
	if st := ptStatus(p, bad.url); !errors.Is(st.LastError, websocket.ErrReadLimit) {
		t.Fatalf("dropped for %v", st.LastError)
	}
	if grew := peak.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("%d bytes allocated for a 16 MiB frame refused", grew)
	}
}
