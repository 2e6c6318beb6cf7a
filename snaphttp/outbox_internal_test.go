package snaphttp

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/snap"
)

func frameID(m *snap.Message) ([]byte, error) { return []byte(m.ID), nil }

// send waits for room in a full queue: it returns once the writer takes a
// frame; when the exchange's context ends it returns that error without
// failing the exchange (the final response is still queued); when nothing
// is taken for the timeout it fails the exchange with ErrSlowReader.
func TestOutboxSendWaits(t *testing.T) {
	t.Run("room", func(t *testing.T) {
		o := newOutbox(1, 1<<20, time.Hour, frameID, nil)
		o.send(context.Background(), &snap.Message{ID: "1"})
		sent := make(chan error, 1)
		go func() { sent <- o.send(context.Background(), &snap.Message{ID: "2"}) }()
		if got := string((<-o.ch).b); got != "1" {
			t.Fatalf("first frame %q", got)
		}
		if err := <-sent; err != nil {
			t.Fatalf("send: %v", err)
		}
		if got := string((<-o.ch).b); got != "2" {
			t.Fatalf("second frame %q", got)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		o := newOutbox(1, 1<<20, time.Hour, frameID, nil)
		o.send(context.Background(), &snap.Message{ID: "1"})
		ctx, cancel := context.WithCancel(context.Background())
		sent := make(chan error, 1)
		go func() { sent <- o.send(ctx, &snap.Message{ID: "2"}) }()
		cancel()
		if err := <-sent; !errors.Is(err, context.Canceled) {
			t.Fatalf("send: %v, want context.Canceled", err)
		}
		if err := o.failed(); err != nil {
			t.Fatalf("the exchange failed: %v", err)
		}
		<-o.ch
		o.final(context.Background(), &snap.Message{ID: "final"})
		if got := string((<-o.ch).b); got != "final" {
			t.Fatalf("frame %q, want the final response", got)
		}
	})
	t.Run("nothing taken", func(t *testing.T) {
		aborted := make(chan struct{})
		o := newOutbox(1, 1<<20, 10*time.Millisecond, frameID, func() { close(aborted) })
		o.send(context.Background(), &snap.Message{ID: "1"})
		if err := o.send(context.Background(), &snap.Message{ID: "2"}); !errors.Is(err, ErrSlowReader) {
			t.Fatalf("send: %v, want ErrSlowReader", err)
		}
		<-aborted
		if err := o.send(context.Background(), &snap.Message{ID: "3"}); !errors.Is(err, ErrSlowReader) {
			t.Fatalf("send after the failure: %v", err)
		}
	})
}

// net/http cancels a request's context as soon as a write to the peer
// fails, before the writer records why: a send waiting for room then
// gets the writer's verdict (ErrSlowReader for a write that timed out),
// not the context's end, once the write in progress is over.
func TestOutboxSendAwaitsTheWritesVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOutbox(1, 1<<20, time.Hour, frameID, nil)
		o.send(t.Context(), &snap.Message{ID: "1"}) // the queue is full
		ctx, cancel := context.WithCancel(t.Context())
		release := make(chan struct{})
		go o.write(func() error {
			cancel() // as net/http does when the write fails
			<-release
			return os.ErrDeadlineExceeded
		})
		synctest.Wait() // the write is in progress, ctx has ended
		sent := make(chan error, 1)
		go func() { sent <- o.send(ctx, &snap.Message{ID: "2"}) }()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("send returned %v while the write was in progress", err)
		default:
		}
		close(release)
		if err := <-sent; !errors.Is(err, ErrSlowReader) {
			t.Fatalf("send: %v, want ErrSlowReader", err)
		}
	})
}

// The queue is bounded in bytes as well as in frames: a frame that does
// not fit beside those queued waits until the writer is done with one;
// a frame larger than the bound is queued when nothing else is; nothing
// taken for the timeout fails the exchange with ErrSlowReader.
func TestOutboxBoundsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frame := func(m *snap.Message) ([]byte, error) { return []byte(m.ID), nil }
		o := newOutbox(64, 10, time.Second, frame, nil)
		for _, id := range []string{"aaaa", "bbbb"} {
			if err := o.send(t.Context(), &snap.Message{ID: id}); err != nil {
				t.Fatalf("send %s: %v", id, err)
			}
		}
		sent := make(chan error, 1)
		go func() { sent <- o.send(t.Context(), &snap.Message{ID: "cccc"}) }()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("send of 4 bytes beside 8 queued, bound 10, returned %v", err)
		default:
		}
		f := <-o.ch // taken, still being written: its bytes still count
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("send returned %v before the writer was done with a frame", err)
		default:
		}
		o.taken(f)
		if err := <-sent; err != nil {
			t.Fatalf("send once room was made: %v", err)
		}
		for range 2 {
			o.taken(<-o.ch)
		}
		big := "0123456789abcdef"
		if err := o.send(t.Context(), &snap.Message{ID: big}); err != nil {
			t.Fatalf("a frame over the bound, alone: %v", err)
		}
		if err := o.send(t.Context(), &snap.Message{ID: "x"}); !errors.Is(err, ErrSlowReader) {
			t.Fatalf("send beside a frame over the bound, nothing taken: %v, want ErrSlowReader", err)
		}
	})
}

// A frame waiting for room in bytes fails the exchange only when the
// writer takes nothing for the timeout, as one waiting for room in frames
// does: a peer that takes a frame every 0.9 of the timeout keeps its
// stream, though the frame waits for three frames to be taken. Before,
// the timeout ran from the send, whatever was taken meanwhile.
func TestOutboxTimeoutRunsFromTheLastFrameTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOutbox(64, 10, time.Second, frameID, nil)
		for _, id := range []string{"aa", "bb", "cc", "dd"} {
			if err := o.send(t.Context(), &snap.Message{ID: id}); err != nil {
				t.Fatalf("send %s: %v", id, err)
			}
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for f := range o.ch {
				time.Sleep(900 * time.Millisecond) // the peer takes it
				o.taken(f)
			}
		}()
		start := time.Now()
		err := o.send(t.Context(), &snap.Message{ID: "eeeeeeee"})
		waited := time.Since(start)
		o.close()
		<-drained
		if err != nil {
			t.Fatalf("send after %v, a frame taken every 0.9 s: %v", waited, err)
		}
		if waited != 2700*time.Millisecond {
			t.Errorf("waited %v; want 2.7 s, three frames taken", waited)
		}
	})
}

// newOutbox is an outbox of size frames and maxBytes, with room in
// AnswerMemory for every frame.
func newOutbox(size, maxBytes int, timeout time.Duration, frame func(*snap.Message) ([]byte, error), abort func()) *outbox {
	s := &Server{cfg: Config{StreamBuffer: size, StreamBufferBytes: maxBytes, WriteTimeout: timeout,
		Handler: refuseNothing{}}, answers: newAnswerBudget(1<<40, 1<<40)}
	return s.newOutbox(context.Background(), netip.Addr{}, frame, abort, nil)
}

// refuseNothing is a Handler that answers nothing.
type refuseNothing struct{}

func (refuseNothing) Serve(context.Context, snap.Inbound, func(*snap.Message) error) *snap.Message {
	return nil
}
func (refuseNothing) Refuse(*snap.Error) *snap.Message { return nil }

// An answer that needs, beside its exchange's frames being written, more
// than its peer's share of AnswerMemory waits for them as long as the
// peer takes them (the writer fails the exchange when a write times
// out), not answerWait: they are the peer's own, and leave as it reads.
// Before, a WebSocket's next answer, or a stream's final response after
// a large event, was refused 5003 whenever its peer took more than a
// quarter of a second to read the one before, the node idle.
func TestOutboxWaitsForItsOwnFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Server{cfg: Config{StreamBuffer: 64, StreamBufferBytes: 1 << 20, WriteTimeout: 10 * time.Second,
			Handler: refuseNothing{}}, answers: newAnswerBudget(100, 100)}
		o := s.newOutbox(t.Context(), netip.MustParseAddr("192.0.2.1"), frameID, nil, nil)
		first, second := strings.Repeat("a", 60), strings.Repeat("b", 60)
		if err := o.send(t.Context(), &snap.Message{ID: first}); err != nil {
			t.Fatal(err)
		}
		var got []string
		written := make(chan struct{})
		go func() { // the peer takes a second over each
			defer close(written)
			for f := range o.ch {
				time.Sleep(time.Second)
				got = append(got, string(f.b))
				o.taken(f)
			}
		}()
		o.final(t.Context(), &snap.Message{ID: second})
		busy, err := o.busy(), o.failed()
		o.close()
		<-written
		if busy != "" || err != nil {
			t.Fatalf("the final answer, waiting for the frame before it: busy %q, failed %v", busy, err)
		}
		if len(got) != 2 || got[1] != second {
			t.Fatalf("frames written %q, want both", got)
		}
		if used, _ := s.answers.tryTake(netip.MustParseAddr("192.0.2.1"), 100); used != "" {
			t.Fatalf("AnswerMemory not given back (%s)", used)
		}
	})
	// It waits among the answers waiting for room, which hold their
	// serialized form: without room there, it is refused at once.
	synctest.Test(t, func(t *testing.T) {
		s := &Server{cfg: Config{StreamBuffer: 64, StreamBufferBytes: 1 << 20, WriteTimeout: 10 * time.Second,
			Handler: refuseNothing{}}, answers: newAnswerBudget(100, 100)}
		key := netip.MustParseAddr("192.0.2.1")
		o := s.newOutbox(t.Context(), key, frameID, nil, nil)
		if err := o.send(t.Context(), &snap.Message{ID: strings.Repeat("a", 60)}); err != nil {
			t.Fatal(err)
		}
		if scope := s.answers.startWaiting(netip.MustParseAddr("192.0.2.2"), 100); scope != "" {
			t.Fatal(scope)
		}
		start := time.Now()
		o.final(t.Context(), &snap.Message{ID: strings.Repeat("b", 60)})
		if busy := o.busy(); busy != "node" || time.Since(start) != 0 {
			t.Errorf("with no room among the answers waiting: busy %q after %v, want node at once", busy, time.Since(start))
		}
		o.taken(<-o.ch)
		s.answers.stopWaiting(netip.MustParseAddr("192.0.2.2"), 100)
		if s.answers.used != 0 || s.answers.waiting != 0 {
			t.Errorf("AnswerMemory holds %d, %d waiting, want none", s.answers.used, s.answers.waiting)
		}
	})
}

// The answers waiting for room in AnswerMemory hold their serialized
// form outside it: they may hold at most as much again, a peer's at most
// its share, and an answer past that is refused at once, not after
// answerWait. Before, every connection could hold an answer of up to
// MaxResponse waiting: 512 connections, 2 GiB beside the 64 MiB bound,
// renewed by the peers as fast as they were refused.
func TestAnswerWaitersAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newAnswerBudget(160, 10) // a peer's share: 10
		peer := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}) }
		for i := range 16 {
			if scope := b.take(t.Context(), peer(i), 10); scope != "" {
				t.Fatalf("take %d: %s", i, scope)
			}
		}
		waited := make(chan string, 16)
		for i := range 16 { // as much again waits
			go func() { waited <- b.take(t.Context(), peer(100+i), 10) }()
		}
		synctest.Wait()
		start := time.Now()
		if scope := b.take(t.Context(), peer(200), 10); scope != "node" || time.Since(start) != 0 {
			t.Errorf("an answer past the waiting room: scope %q after %v, want node at once", scope, time.Since(start))
		}
		b.release(peer(0), 10)
		synctest.Wait()
		if got := <-waited; got != "" {
			t.Errorf("a waiter, once room was made: %q", got)
		}
		// The room left by the waiter that got it: one more may wait,
		// but not two of one peer.
		go func() { waited <- b.take(t.Context(), peer(201), 10) }()
		synctest.Wait()
		start = time.Now()
		if scope := b.take(t.Context(), peer(201), 10); scope != "peer" || time.Since(start) != 0 {
			t.Errorf("a peer's second waiter: scope %q after %v, want peer at once", scope, time.Since(start))
		}
		for range 16 {
			if got := <-waited; got != "node" {
				t.Errorf("a waiter without room: %q, want node", got)
			}
		}
	})
}
