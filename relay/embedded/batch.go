package embedded

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// maxBatch bounds what a burst of frames holds back before it is written:
// past it the frames so far go out and the burst goes on.
const maxBatch = 64 << 10

// batchConn is a client's socket whose writes, while a burst is open, are
// collected and sent with one write system call when the burst ends. The
// writer opens a burst when it takes a message from its queues and ends it
// when they are empty, so a burst never waits for more messages: frames
// leave in the order they were written, as soon as nothing else is ready.
// Writes outside a burst (the handshake, a pong or close frame) go out at
// once. Safe for concurrent use; SetWriteDeadline reaches the socket
// without waiting, so a write in progress can be cut short.
//
// A burst's buffer is borrowed from pool (the relay's, of *[]byte) at its
// first write and given back when it ends: an idle connection holds none,
// and connections sending one after another share a few.
type batchConn struct {
	net.Conn
	pool *sync.Pool
	mu   sync.Mutex
	hold bool
	buf  *[]byte // the burst's, at most maxBatch bytes; nil outside a burst
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.hold {
		return b.Conn.Write(p)
	}
	if b.buf == nil {
		if bp, ok := b.pool.Get().(*[]byte); ok {
			b.buf = bp
		} else {
			b.buf = new([]byte)
		}
	}
	if len(*b.buf)+len(p) > maxBatch {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxBatch {
			return b.Conn.Write(p)
		}
	}
	*b.buf = append(*b.buf, p...)
	return len(p), nil
}

// begin opens a burst: writes are held until end.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.hold = true
	b.mu.Unlock()
}

// end closes the burst, writes what it held in one write, and gives the
// buffer back.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold = false
	err := b.flushLocked()
	if b.buf != nil {
		if cap(*b.buf) <= maxBatch { // append may have grown it past
			b.pool.Put(b.buf)
		}
		b.buf = nil
	}
	return err
}

func (b *batchConn) flushLocked() error {
	if b.buf == nil || len(*b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(*b.buf)
	*b.buf = (*b.buf)[:0]
	return err
}

// batchWriter hands the WebSocket upgrader a batchConn in place of the
// hijacked socket.
type batchWriter struct {
	http.ResponseWriter
	pool *sync.Pool // the bursts' buffers
	conn *batchConn
}

func (w *batchWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, rw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &batchConn{Conn: c, pool: w.pool}
	return w.conn, rw, nil
}
