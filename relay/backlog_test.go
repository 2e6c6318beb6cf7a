package relay

import (
	"context"
	"runtime"
	"strconv"
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
	// Made before the heap is first read: the flood is sent allocating
	// nothing (see eventFrames).
	fr := newEventFrames(t, one, two, &flood, sentinel)
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			send := func(i int) error { return write(fr.frame(i, req.SubscriptionID)) }
			// one fills the subscription's buffer of 1; the pool's
			// reader waits with two for the subscriber.
			for i := range 2 {
				if send(i) != nil {
					return
				}
			}
			for range frames {
				if send(2) != nil {
					return
				}
			}
			close(flooded)
			_ = send(3)
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

// eventFrames holds events' JSON and the room for an EVENT frame of any
// of them, for a hostile relay sending a flood while the test measures
// the heap: made before the heap is first read, they let the relay send
// allocating nothing, so that what the heap grows by is the pool's alone.
// (Marshalling each frame as it goes, the relay held a frame or two of a
// megabyte more, or less, depending on how far it had got when the heap
// was read: on a loaded machine it goes on filling the kernel's buffers
// for a while after the pool stops reading.)
type eventFrames struct {
	events [][]byte // each event's JSON
	buf    []byte   // one frame: the relay's write copies it before the next
}

func newEventFrames(t *testing.T, evs ...*nostr.Event) *eventFrames {
	t.Helper()
	f := &eventFrames{}
	longest := 0
	for _, ev := range evs {
		b, err := ev.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		f.events = append(f.events, b)
		longest = max(longest, len(b))
	}
	// The frame's brackets, its label and room for a quoted
	// subscription id of 64 characters each escaped.
	f.buf = make([]byte, 0, longest+len(`["EVENT",,]`)+2+6*64)
	return f
}

// frame returns the EVENT frame of event i for subscription subID, in
// f's buffer: it is good until the next call.
func (f *eventFrames) frame(i int, subID string) []byte {
	b := append(f.buf[:0], `["EVENT",`...)
	b = strconv.AppendQuote(b, subID) // the pool's ids: JSON strings as they are
	b = append(b, ',')
	b = append(b, f.events[i]...)
	return append(b, ']')
}
