package relay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/fakerelay"
)

// A relay that connects while a publication waits for the only relay that
// was connected, which never answers, is given the event too, and the
// publication succeeds once it accepts. Before, the event went only to
// the relays connected when Publish began: it waited out its whole bound
// for the silent relay and failed, the relay that came meanwhile never
// having been sent the event.
func TestPublishReachesARelayThatConnectsMeanwhile(t *testing.T) {
	var (
		got  = make(chan struct{})
		once sync.Once
	)
	bad := newHostileRelay(t, func(frame []byte, _ func([]byte) error) {
		if _, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
			once.Do(func() { close(got) }) // and never answers
		}
	})
	open := make(chan struct{})
	good := fakerelay.Gated(t, open, fakerelay.AcceptEvents)
	const bound = 20 * time.Second
	p := NewPool(PoolConfig{URLs: []string{bad.url, good}, Logger: ptLogger(), PublishTimeout: bound})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "the silent relay connected", func() bool { return itState(p, bad.url) == StateConnected })

	type result struct {
		res PublishResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), "reply"))
		done <- result{res, err}
	}()
	<-got // the silent relay has the event: Publish is waiting for it
	close(open)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("publish: %v (%+v)", r.err, r.res.Relays)
		}
		if o := r.res.Relays; r.res.Accepted() != 1 || !o[1].OK {
			t.Fatalf("outcomes %+v", o)
		}
	case <-time.After(bound - 5*time.Second):
		t.Fatal("Publish still waits for the silent relay, another relay having connected")
	}
}
