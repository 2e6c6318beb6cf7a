package snaphttp

import (
	"context"
	"errors"
	"sync"

	"github.com/snapnode/snapnode/snap"
)

// ErrSlowReader is returned by a stream's send when the peer lets its
// bounded queue fill: the stream ends and the connection is closed, so
// that whoever feeds the stream is never held up by one peer.
var ErrSlowReader = errors.New("snaphttp: the peer reads too slowly; stream ended")

// errWriteFailed is returned by send once writing to the peer failed.
var errWriteFailed = errors.New("snaphttp: the peer is gone")

// outbox queues the frames of one exchange between the goroutine that
// produces them (snap.Handler.Serve) and the one that writes them. send
// never blocks: when the queue is full the exchange fails. The final
// response is queued with a wait, since the writer always drains the
// queue, discarding once it failed.
type outbox struct {
	ch    chan []byte
	frame func(*snap.Message) ([]byte, error)
	// abort unblocks a write in progress and stops the exchange.
	abort func()

	mu     sync.Mutex
	err    error
	closed bool
}

func newOutbox(size int, frame func(*snap.Message) ([]byte, error), abort func()) *outbox {
	return &outbox{ch: make(chan []byte, size), frame: frame, abort: abort}
}

// send queues an event without waiting.
func (o *outbox) send(m *snap.Message) error {
	if err := o.failed(); err != nil {
		return err
	}
	b, err := o.frame(m)
	if err != nil {
		return err
	}
	select {
	case o.ch <- b:
		return nil
	default:
		o.fail(ErrSlowReader)
		return ErrSlowReader
	}
}

// final queues the last message of an exchange, waiting for room until
// ctx ends; ctx should end only when the peer is gone or shutdown is
// forced, not when the stream ends. A nil m queues nothing.
func (o *outbox) final(ctx context.Context, m *snap.Message) {
	if m == nil || o.failed() != nil {
		return
	}
	b, err := o.frame(m)
	if err != nil {
		o.fail(err)
		return
	}
	select {
	case o.ch <- b:
		return
	default:
	}
	select {
	case o.ch <- b:
	case <-ctx.Done():
		// Only a forced shutdown gets here: the writer is stuck and the
		// connection is being closed.
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
	if first && o.abort != nil {
		o.abort()
	}
}

func (o *outbox) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
