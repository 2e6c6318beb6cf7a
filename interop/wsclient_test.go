package interop

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// wsRelay is a small NIP-01 client on gorilla/websocket, with go-nostr's
// types and envelope parser. The tests use it instead of go-nostr's Relay
// because go-nostr v0.38.2 tears connections down with a data race
// (Relay.Close reads r.Connection while its own goroutine sets it to nil;
// fixed upstream later) that fails any -race run once a connection ends,
// and each QuerySync leaves a goroutine spinning. go-nostr's own client
// is exercised in TestGoNostrClient, in a child process.
type wsRelay struct {
	t    testing.TB
	conn *websocket.Conn
	wmu  sync.Mutex // one writer at a time

	mu   sync.Mutex
	subs map[string]chan nostr.Envelope // subscription id → EVENT, EOSE, CLOSED
	oks  map[string]chan *nostr.OKEnvelope
	done chan struct{}
}

var subCounter atomic.Int64

// dial connects to url; the connection is closed in t.Cleanup.
func dial(t testing.TB, url string) *wsRelay {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	r := &wsRelay{t: t, conn: c, subs: map[string]chan nostr.Envelope{}, oks: map[string]chan *nostr.OKEnvelope{}, done: make(chan struct{})}
	go r.read()
	t.Cleanup(func() {
		c.Close()
		<-r.done
	})
	return r
}

func (r *wsRelay) read() {
	defer close(r.done)
	for {
		_, msg, err := r.conn.ReadMessage()
		if err != nil {
			r.mu.Lock()
			for id, ch := range r.subs {
				close(ch)
				delete(r.subs, id)
			}
			r.mu.Unlock()
			return
		}
		env := nostr.ParseMessage(msg)
		var sub string
		switch e := env.(type) {
		case *nostr.OKEnvelope:
			r.mu.Lock()
			ch := r.oks[e.EventID]
			delete(r.oks, e.EventID)
			r.mu.Unlock()
			if ch != nil {
				ch <- e
			}
			continue
		case *nostr.EventEnvelope:
			if e.SubscriptionID != nil {
				sub = *e.SubscriptionID
			}
		case *nostr.EOSEEnvelope:
			sub = string(*e)
		case *nostr.ClosedEnvelope:
			sub = e.SubscriptionID
		default:
			continue
		}
		r.mu.Lock()
		ch := r.subs[sub]
		r.mu.Unlock()
		if ch != nil {
			select {
			case ch <- env:
			case <-time.After(10 * time.Second):
				// Nobody is reading this subscription any more.
			}
		}
	}
}

func (r *wsRelay) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.conn.WriteMessage(websocket.TextMessage, b)
}

// Publish sends ev and waits for the relay's OK.
func (r *wsRelay) Publish(ev nostr.Event) error {
	ch := make(chan *nostr.OKEnvelope, 1)
	r.mu.Lock()
	r.oks[ev.ID] = ch
	r.mu.Unlock()
	if err := r.send([]any{"EVENT", ev}); err != nil {
		return err
	}
	select {
	case ok := <-ch:
		if !ok.OK {
			return fmt.Errorf("relay refused %s: %s", ev.ID, ok.Reason)
		}
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no OK for %s", ev.ID)
	}
}

// liveSub is an open subscription. Events receives, after EOSE, the live
// events that match the filter and carry a valid signature: like go-nostr
// and nostr-tools, the client re-applies its filter, since a relay may
// send more (the third-party one ignores tag filters on live
// subscriptions).
type liveSub struct {
	Events <-chan *nostr.Event
	close  func()
}

func (s *liveSub) Close() { s.close() }

func (r *wsRelay) req(f nostr.Filter) (string, chan nostr.Envelope) {
	r.t.Helper()
	id := "t" + strconv.FormatInt(subCounter.Add(1), 10)
	ch := make(chan nostr.Envelope, 64)
	r.mu.Lock()
	r.subs[id] = ch
	r.mu.Unlock()
	if err := r.send([]any{"REQ", id, f}); err != nil {
		r.t.Fatalf("REQ: %v", err)
	}
	return id, ch
}

func (r *wsRelay) unsub(id string) {
	r.mu.Lock()
	delete(r.subs, id)
	r.mu.Unlock()
	r.send([]any{"CLOSE", id})
}

// Query returns the stored events matching f (until EOSE).
func (r *wsRelay) Query(f nostr.Filter) []*nostr.Event {
	r.t.Helper()
	id, ch := r.req(f)
	defer r.unsub(id)
	var evs []*nostr.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case env, ok := <-ch:
			if !ok {
				r.t.Fatalf("query %v: connection closed", f)
			}
			switch e := env.(type) {
			case *nostr.EventEnvelope:
				ev := e.Event
				if ok, _ := ev.CheckSignature(); ok && f.Matches(&ev) {
					evs = append(evs, &ev)
				}
			case *nostr.EOSEEnvelope:
				return evs
			case *nostr.ClosedEnvelope:
				r.t.Fatalf("query %v: closed by the relay: %s", f, e.Reason)
			}
		case <-timeout:
			r.t.Fatalf("query %v: no EOSE within 10 s", f)
		}
	}
}

// Subscribe opens a live subscription and returns once the relay has
// sent EOSE (stored events are dropped).
func (r *wsRelay) Subscribe(f nostr.Filter) *liveSub {
	r.t.Helper()
	id, ch := r.req(f)
	timeout := time.After(10 * time.Second)
wait:
	for {
		select {
		case env, ok := <-ch:
			if !ok {
				r.t.Fatal("subscribe: connection closed")
			}
			if _, eose := env.(*nostr.EOSEEnvelope); eose {
				break wait
			}
		case <-timeout:
			r.t.Fatalf("subscribe %v: no EOSE within 10 s", f)
		}
	}
	out := make(chan *nostr.Event)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for {
			select {
			case env, ok := <-ch:
				if !ok {
					return
				}
				e, isEvent := env.(*nostr.EventEnvelope)
				if !isEvent {
					continue
				}
				ev := e.Event
				if ok, _ := ev.CheckSignature(); !ok || !f.MatchesIgnoringTimestampConstraints(&ev) {
					continue
				}
				select {
				case out <- &ev:
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	return &liveSub{Events: out, close: func() {
		once.Do(func() {
			close(stop)
			r.unsub(id)
		})
	}}
}
