package snaphttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// ErrSlowReader is returned by a stream's send when the peer took
// nothing for WriteTimeout while its bounded queue was full (or while a
// frame was being written to it): the stream ends and the connection is
// closed. Until then send waits for room, as net/http's
// ResponseWriter.Write waits for the peer, so that a peer reading steadily
// gets a burst of events longer than the queue whole; whoever feeds
// several streams must feed each from its own goroutine (see
// snap.StreamHandlerFunc).
var ErrSlowReader = errors.New("snaphttp: the peer reads too slowly; stream ended")

// outbox queues the frames of one exchange between the goroutine that
// produces them (snap.Handler.Serve) and the one that writes them. The
// queue is bounded twice: in frames (the channel's capacity) and in bytes
// (maxBytes, counting a frame from when it is queued until the writer is
// done with it; one frame larger than that is queued alone), so that a
// peer that reads slowly holds a bounded memory whatever the size of its
// events. When the queue is full send waits for room, up to timeout
// (WriteTimeout): a peer that takes nothing for that long fails the
// exchange with ErrSlowReader. The final response is queued with a wait
// too, since the writer always drains the queue, discarding once it
// failed. The writer calls taken for every frame it receives.
//
// Each frame also holds its share of the server's AnswerMemory (answers),
// from when it is made until the writer is done with it. An exchange
// reserves room for its answer before its request is handled (hold,
// begin): a request without room is refused busy (refuseBusy, the
// Handler's Refuse of answerBusy), never handled, and send fails with
// ErrAnswerMemory, final queues nothing, and busy reports the scope that
// had no room. The final response takes over the reservation, and waits,
// as answerBudget.grow does, for room for what it needs beyond it: without
// it within answerWait, the abridged answer (Server.abridge) is sent in
// its place, never the busy refusal, since the request was handled. An
// event that needs, beside the exchange's own frames not yet written,
// more than the peer's share waits for them as long as the peer takes
// them (awaitOwn); one that then finds no room within answerWait is not
// sent, as snap.Server drops an event too large for its transport: the
// final response carries the whole task, or says tasks/get does.
type outbox struct {
	ch       chan frame
	frame    func(*snap.Message) ([]byte, error)
	timeout  time.Duration
	maxBytes int
	// abort unblocks a write in progress and stops the exchange.
	abort func()
	// answers is the server's AnswerMemory, key the peer's share of it;
	// refuse is the Handler's Refuse; stop, when set, ends the exchange's
	// context once it is refused. life is the context of the connection
	// (the request's, the WebSocket's): the busy refusal is queued until
	// it ends.
	life    context.Context
	answers *answerBudget
	key     netip.Addr
	refuse  func(*snap.Error) *snap.Message
	abridge func(*snap.Message) *snap.Message
	stop    func()
	// done is closed when the exchange fails.
	done chan struct{}

	// writing holds a token while the writer writes (see write).
	writing chan struct{}

	mu     sync.Mutex
	err    error
	closed bool
	// queued counts the bytes of the frames queued or being written;
	// room is closed, and replaced, whenever some are taken. held counts
	// what the frames made and not yet taken hold of AnswerMemory.
	queued int
	held   int64
	room   chan struct{}
	// refused is the scope of the busy refusal queued in place of a
	// frame ("" while none is).
	refused string
	// reserved is what the exchange reserved of AnswerMemory before its
	// request was handled, until its final response takes it over.
	reserved int64
}

// frame is one queued message, serialized, and what it holds of
// AnswerMemory.
type frame struct {
	b    []byte
	held int64
}

// newOutbox returns the outbox of one SSE exchange or WebSocket
// connection of s's, with key's share of AnswerMemory.
func (s *Server) newOutbox(life context.Context, key netip.Addr, encode func(*snap.Message) ([]byte, error), abort, stop func()) *outbox {
	return &outbox{ch: make(chan frame, s.cfg.StreamBuffer), maxBytes: s.cfg.StreamBufferBytes, frame: encode,
		timeout: s.cfg.WriteTimeout, abort: abort, life: life, answers: s.answers, key: key, refuse: s.cfg.Handler.Refuse, abridge: s.abridge, stop: stop,
		done: make(chan struct{}), writing: make(chan struct{}, 1), room: make(chan struct{})}
}

// begin reserves n bytes of AnswerMemory for the answer to the
// exchange's request, before it is handled, waiting as answerBudget.take
// does; it reports the scope without room ("" once reserved).
func (o *outbox) begin(ctx context.Context, n int64) (scope string) {
	if scope := o.answers.take(ctx, o.key, n); scope != "" {
		return scope
	}
	o.hold(n)
	return ""
}

// hold makes n bytes reserved of AnswerMemory (see begin) the exchange's.
func (o *outbox) hold(n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reserved += n
}

// end gives back what the exchange reserved and its final response did
// not take over: it had none, or the exchange failed or was refused.
func (o *outbox) end() {
	o.answers.release(o.key, o.takeReserved())
}

// takeReserved returns the exchange's reservation, which is no longer
// the exchange's.
func (o *outbox) takeReserved() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.reserved
	o.reserved = 0
	return n
}

// encode is m serialized (frame), holding its share of AnswerMemory,
// waiting for it as answerBudget.take does, once the exchange's own
// frames leave it room (awaitOwn). Without room it reports the scope
// that had none; when ctx ends first, ctx's error; when the exchange
// fails meanwhile, its error.
func (o *outbox) encode(ctx context.Context, m *snap.Message) (f frame, scope string, err error) {
	b, err := o.frame(m)
	if err != nil {
		return frame{}, "", err
	}
	o.mu.Lock()
	reserved := o.reserved
	o.mu.Unlock()
	// Within the peer's share beside the exchange's reservation, as size
	// keeps any answer within the share.
	n := min(o.answers.size(cap(b)), o.answers.perPeer-reserved)
	if scope, err := o.awaitOwn(ctx, n); err != nil || scope != "" {
		return frame{}, scope, err
	}
	if scope := o.answers.take(ctx, o.key, n); scope != "" {
		if err := ctx.Err(); err != nil {
			return frame{}, "", err // the exchange ended, not the room
		}
		return frame{}, scope, nil
	}
	o.mu.Lock()
	o.held += n
	o.mu.Unlock()
	return frame{b: b, held: n}, "", nil
}

// awaitOwn waits while the frames this exchange made and its writer has
// not yet taken hold so much of AnswerMemory that n more would exceed
// the peer's share: they leave as the peer reads them, so the wait is
// the peer's, as a wait for room in the queue is, and not answerWait
// (which would refuse a WebSocket's next answer, or a stream's final
// response, whenever the peer takes more than a quarter of a second to
// read the one before). It ends when the exchange fails (a write that
// times out fails it), with its error, or when ctx ends, with ctx's.
// The frame waiting holds its serialized form meanwhile: it counts
// among the answers waiting (answerBudget.startWaiting), and without
// room there it does not wait (the scope that had none).
func (o *outbox) awaitOwn(ctx context.Context, n int64) (scope string, err error) {
	waiting := false
	defer func() {
		if waiting {
			o.answers.stopWaiting(o.key, n)
		}
	}()
	for {
		o.mu.Lock()
		held, room := o.held, o.room
		o.mu.Unlock()
		if held == 0 || held+n <= o.answers.perPeer {
			return "", nil
		}
		if !waiting {
			if scope := o.answers.startWaiting(o.key, n); scope != "" {
				return scope, nil
			}
			waiting = true
		}
		select {
		case <-room:
		case <-o.done:
			return "", o.failed()
		case <-ctx.Done():
			return "", o.ended(ctx)
		}
	}
}

// busy reports the scope of the busy refusal that ended the exchange,
// or "" when none did.
func (o *outbox) busy() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused
}

// unbusy ends the refused exchange (see busy) of a WebSocket, whose
// outbox serves one exchange after another: the next one's frames are
// sent again.
func (o *outbox) unbusy() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = ""
}

// refuseBusy queues, in place of a frame without room in AnswerMemory,
// the busy refusal, which holds none (it is small), and ends the
// exchange. A Handler that makes no refusal fails the exchange instead.
func (o *outbox) refuseBusy(scope string) {
	o.mu.Lock()
	o.refused = scope
	o.mu.Unlock()
	if o.stop != nil {
		defer o.stop()
	}
	var b []byte
	if m := o.refuse(answerBusy(scope)); m != nil {
		b, _ = o.frame(m)
	}
	if b == nil {
		o.fail(ErrAnswerMemory)
		return
	}
	o.queue(o.life, frame{b: b})
}

// reserve counts n bytes more as queued when they fit (or nothing else
// is queued) and reports true; otherwise it returns a channel closed once
// some bytes are taken.
func (o *outbox) reserve(n int) (bool, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queued == 0 || o.queued+n <= o.maxBytes {
		o.queued += n
		return true, nil
	}
	return false, o.room
}

// taken gives back the bytes of a frame the writer is done with
// (written or discarded), or that was never queued, and its share of
// AnswerMemory.
func (o *outbox) taken(f frame) {
	o.answers.release(o.key, f.held)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held -= f.held
	o.queued -= len(f.b)
	close(o.room)
	o.room = make(chan struct{})
}

// send queues an event, waiting for room while the queue is full (in
// frames or in bytes): until the writer takes a frame, the exchange
// fails (the writer's error; a write that timed out is ErrSlowReader),
// timeout passes with no frame taken (ErrSlowReader, and the exchange
// fails; each frame taken starts it again), or ctx, the exchange's, ends (ctx's error; the exchange does
// not fail, so that its final response is still written). An event
// without room in AnswerMemory is not sent, and send returns nil: the
// request was handled, and the final response tells the task. An
// exchange refused before its request was handled (busy) fails send
// with ErrAnswerMemory.
func (o *outbox) send(ctx context.Context, m *snap.Message) error {
	if err := o.failed(); err != nil {
		return err
	}
	if o.busy() != "" {
		return ErrAnswerMemory
	}
	f, scope, err := o.encode(ctx, m)
	switch {
	case err != nil:
		return err
	case scope != "":
		return nil // dropped: see above
	}
	b := f.b
	reserved, room := o.reserve(len(b))
	if reserved {
		select {
		case o.ch <- f:
			return nil
		default:
		}
	}
	t := time.NewTimer(o.timeout)
	defer t.Stop()
	for {
		var ch chan<- frame
		if reserved {
			ch = o.ch
		}
		select {
		case ch <- f:
			return nil
		case <-room:
			// A frame was taken: the peer reads, and has the timeout
			// again to take the next, however many this one waits for.
			t.Reset(o.timeout)
			reserved, room = o.reserve(len(b))
			continue
		case <-o.done:
		case <-ctx.Done():
			o.untaken(f, reserved)
			return o.ended(ctx) // when the exchange failed, the failure cancelled ctx
		case <-t.C:
			o.fail(ErrSlowReader)
		}
		o.untaken(f, reserved)
		return o.failed()
	}
}

// ended is the error of a wait that ctx ended: the exchange's failure
// when it failed, else ctx's error. net/http cancels a request's context
// as soon as a write to the peer fails, before the writer has recorded
// why: the write in progress, if any, decides first.
func (o *outbox) ended(ctx context.Context) error {
	o.writing <- struct{}{}
	err := o.failed()
	<-o.writing
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// untaken gives back what f, never queued, holds: its bytes in the
// queue when reserved, its share of AnswerMemory.
func (o *outbox) untaken(f frame, reserved bool) {
	if !reserved {
		f.b = nil
	}
	o.taken(f)
}

// write runs w, one write of the writer to the peer, and fails the
// exchange when it fails (see writeFailed). A send whose context ends
// meanwhile waits for its verdict.
func (o *outbox) write(w func() error) {
	o.writing <- struct{}{}
	defer func() { <-o.writing }()
	if err := w(); err != nil {
		o.fail(writeFailed(err))
	}
}

// writeFailed is the error a failed write of the writer fails the
// exchange with: ErrSlowReader when the write ran out of its time
// (WriteTimeout), the peer taking nothing meanwhile.
func writeFailed(err error) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrSlowReader, err)
	}
	return err
}

// final queues the last message of an exchange, waiting for room until
// ctx ends; ctx should end only when the peer is gone or shutdown is
// forced, not when the stream ends. A nil m queues nothing, nor does an
// exchange already refused (busy). An m answering a request handled
// takes over the exchange's reservation (finalReserved); an m without
// one (a refusal of a request not handled) without room in AnswerMemory
// is refused (refuseBusy).
func (o *outbox) final(ctx context.Context, m *snap.Message) {
	if m == nil || o.failed() != nil || o.busy() != "" {
		return
	}
	if r := o.takeReserved(); r > 0 {
		o.finalReserved(ctx, m, r)
		return
	}
	f, scope, err := o.encode(ctx, m)
	switch {
	case err != nil:
		o.fail(err)
		return
	case scope != "":
		o.refuseBusy(scope)
		return
	}
	o.queue(ctx, f)
}

// finalReserved queues m, holding r, the reservation it takes over, and
// what it needs beyond: once the exchange's own frames leave room for it
// (awaitOwn), at once when there is room, else within answerWait, as
// answerBudget.grow does. Without room, the abridged answer is queued in
// its place (Server.abridge), holding r.
func (o *outbox) finalReserved(ctx context.Context, m *snap.Message, r int64) {
	b, err := o.frame(m)
	if err != nil {
		o.answers.release(o.key, r)
		o.fail(err)
		return
	}
	need := o.answers.size(cap(b))
	if need > r {
		scope, err := o.awaitOwn(ctx, need)
		if err != nil {
			o.answers.release(o.key, r)
			o.fail(err)
			return
		}
		var brief []byte
		whole := false
		if scope == "" {
			r, whole = o.answers.grow(ctx, o.key, r, need, func() {
				brief = o.brief(m)
				m = nil
			})
		} else {
			brief = o.brief(m)
		}
		m = nil
		if !whole {
			if ctx.Err() != nil {
				o.answers.release(o.key, r)
				o.fail(ctx.Err())
				return
			}
			if b = brief; b == nil {
				o.answers.release(o.key, r)
				o.fail(ErrAnswerMemory)
				return
			}
		}
	}
	o.mu.Lock()
	o.held += r
	o.mu.Unlock()
	o.queue(ctx, frame{b: b, held: r})
}

// brief is the abridged answer in place of m, serialized (nil when the
// Handler makes none).
func (o *outbox) brief(m *snap.Message) []byte {
	a := o.abridge(m)
	if a == nil {
		return nil
	}
	b, _ := o.frame(a)
	return b
}

// queue queues f, the last frame of an exchange, which waits for room in
// frames only: it is one more.
func (o *outbox) queue(ctx context.Context, f frame) {
	o.mu.Lock()
	o.queued += len(f.b)
	o.mu.Unlock()
	select {
	case o.ch <- f:
		return
	default:
	}
	select {
	case o.ch <- f:
	case <-ctx.Done():
		// Only a forced shutdown gets here: the writer is stuck and the
		// connection is being closed.
		o.taken(f)
		o.fail(ctx.Err())
	}
}

// close closes the queue once no more frames come; the writer then ends.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		close(o.ch)
	}
}

// fail records the first error and aborts the exchange.
func (o *outbox) fail(err error) {
	o.mu.Lock()
	first := o.err == nil
	if first {
		o.err = err
	}
	o.mu.Unlock()
	if !first {
		return
	}
	close(o.done)
	if o.abort != nil {
		o.abort()
	}
}

func (o *outbox) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
