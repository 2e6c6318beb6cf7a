package relay

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// A relay that floods events of a megabyte while the pool's reader is
// held up by a slow subscriber makes the connection hold at most
// MaxConnBacklog bytes of what it read (and one message more): past it the
// connection stops reading the socket until the pool catches up, and then
// nothing is lost. Before, it read on until 256 messages were queued, each
// holding its event and, through its subscription id, the whole frame it
// came in: the heap grew 111 MB with 44 of these 48 read, about 2.5 MB a
// message, 640 MB a relay at 256.
func TestSlowReaderBoundsRelayBacklog(t *testing.T) {
	const frames = 48
	one, two, sentinel := ptEvent(t, ptNow(), "one"), ptEvent(t, ptNow(), "two"), ptEvent(t, ptNow(), "sentinel")
	flood := nostr.Event{ID: strings.Repeat("0", 64), PubKey: ptPub, Sig: strings.Repeat("0", 128),
		CreatedAt: ptNow(), Kind: KindMessage, Tags: nostr.Tags{{"p", ptPub}}, Content: strings.Repeat("x", wsReadLimit-1024)}
	flooded := make(chan struct{})
	var once sync.Once
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			send := func(ev *nostr.Event) error {
				b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: *ev}.MarshalJSON()
				return write(b)
			}
			// one fills the subscription's buffer of 1; the pool's
			// reader waits with two for the subscriber.
			for _, ev := range []*nostr.Event{one, two} {
				if send(ev) != nil {
					return
				}
			}
			for range frames {
				if send(&flood) != nil {
					return
				}
			}
			close(flooded)
			_ = send(sentinel)
		})
	})
	var before, after runtime.MemStats
	p, sub, c := startCapturing(t, PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), SubscriptionBuffer: 1, SlowConsumerTimeout: time.Hour}, &before)
	itWaitFor(t, "the flood sent or the connection holding back", func() bool {
		select {
		case <-flooded:
			return true
		default:
			return c.stalls.Load() > 0
		}
	})
	held := c.backlog.held.Load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("held %d bytes, heap grew %d bytes", held, grew)
	if held > MaxConnBacklog+2*wsReadLimit {
		t.Errorf("the connection holds %d bytes of messages read, want at most %d and one message", held, MaxConnBacklog)
	}
	if grew > MaxConnBacklog+4*wsReadLimit {
		t.Errorf("the heap grew by %d bytes while %d frames of %d bytes came", grew, frames, wsReadLimit)
	}
	// The subscriber catches up: nothing was dropped.
	awaitEvent(t, sub, one)
	awaitEvent(t, sub, two)
	awaitEvent(t, sub, sentinel)
	if st := p.Health()[0]; st.EventsInvalid != frames {
		t.Fatalf("%d flood events checked, want %d", st.EventsInvalid, frames)
	}
}

// startCapturing starts a pool of cfg (its Dial replaced) on t's context,
// closed when t ends, subscribed to ptFilter, and returns it with the
// subscription and the first relay connection it dialed; the heap is
// read into before just ahead of the start, after a collection, for the
// flood tests' measure of what the pool holds.
func startCapturing(t *testing.T, cfg PoolConfig, before *runtime.MemStats) (*Pool, *Subscription, *wsConn) {
	t.Helper()
	conns := make(chan *wsConn, 1)
	cfg.Dial = func(ctx context.Context, url string) (Conn, error) {
		c, err := DialWebsocket(ctx, url)
		if err == nil {
			select {
			case conns <- c.(*wsConn):
			default:
			}
		}
		return c, err
	}
	p := NewPool(cfg)
	runtime.GC()
	runtime.ReadMemStats(before)
	p.Start(t.Context())
	t.Cleanup(func() { p.Close() })
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	return p, sub, <-conns
}
