package relay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/fakerelay"
)

// A publication awaiting a silent relay, as another relay connects and
// the pool closes, returns at once with its error, and Close returns: the
// relay that connects as the pool closes is not left publishing.
func TestPublishRacingCloseAsARelayConnects(t *testing.T) {
	for range 5 {
		var (
			got  = make(chan struct{})
			once sync.Once
		)
		bad := newHostileRelay(t, func(frame []byte, _ func([]byte) error) {
			if _, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
				once.Do(func() { close(got) })
			}
		})
		open := make(chan struct{})
		good := fakerelay.Gated(t, open, fakerelay.AcceptEvents)
		const bound = 20 * time.Second
		p := NewPool(PoolConfig{URLs: []string{bad.url, good}, Logger: ptLogger(), PublishTimeout: bound})
		p.Start(t.Context())
		itWaitFor(t, "the silent relay connected", func() bool { return itState(p, bad.url) == StateConnected })
		done := make(chan error, 1)
		go func() {
			_, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), "reply"))
			done <- err
		}()
		<-got
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		close(open)
		select {
		case err := <-done:
			if err != nil && errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("publish waited out its bound: %v", err)
			}
		case <-time.After(bound - 5*time.Second):
			t.Fatal("Publish still waits, the pool closed")
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
	}
}
