package embedded

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// maxBatch bounds what a burst of frames holds back before it is written:
// past it the frames so far go out and the burst goes on. A buffer grown
// past keepBatch by a large burst is let go when the burst ends, so that
// idle connections do not each keep the largest burst they ever sent.
const (
	maxBatch  = 64 << 10
	keepBatch = 4 << 10
)

// batchConn is a client's socket whose writes, while a burst is open, are
// collected and sent with one write system call when the burst ends. The
// writer opens a burst when it takes a message from its queues and ends it
// when they are empty, so a burst never waits for more messages: frames
// leave in the order they were written, as soon as nothing else is ready.
// Writes outside a burst (the handshake, a pong or close frame) go out at
// once. Safe for concurrent use; SetWriteDeadline reaches the socket
// without waiting, so a write in progress can be cut short.
type batchConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  []byte // at most maxBatch bytes
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.hold {
		return b.Conn.Write(p)
	}
	if len(b.buf)+len(p) > maxBatch {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxBatch {
			return b.Conn.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// begin opens a burst: writes are held until end.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.hold = true
	b.mu.Unlock()
}

// end closes the burst and writes what it held, in one write.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hold = false
	err := b.flushLocked()
	if cap(b.buf) > keepBatch {
		b.buf = nil
	}
	return err
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// batchWriter hands the WebSocket upgrader a batchConn in place of the
// hijacked socket.
type batchWriter struct {
	http.ResponseWriter
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
	w.conn = &batchConn{Conn: c}
	return w.conn, rw, nil
}
