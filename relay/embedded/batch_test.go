package embedded

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// recordConn is a net.Conn that records each Write it gets.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *recordConn) got() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

func TestBatchConnHoldsABurstAndWritesItOnce(t *testing.T) {
	rc := &recordConn{}
	b := &batchConn{Conn: rc, pool: new(sync.Pool)}
	b.Write([]byte("handshake"))
	b.begin()
	for i := range 5 {
		b.Write([]byte(strconv.Itoa(i)))
	}
	if n := len(rc.got()); n != 1 {
		t.Fatalf("%d writes reached the socket during the burst, want only the one before it", n)
	}
	if err := b.end(); err != nil {
		t.Fatal(err)
	}
	got := rc.got()
	if len(got) != 2 || string(got[1]) != "01234" {
		t.Fatalf("writes = %q, want [handshake 01234]", got)
	}
	b.Write([]byte("pong")) // outside a burst: at once
	if got := rc.got(); len(got) != 3 || string(got[2]) != "pong" {
		t.Fatalf("writes = %q, want the pong written at once", got)
	}
	if err := b.end(); err != nil || len(rc.got()) != 3 {
		t.Fatalf("an empty burst wrote: %q, %v", rc.got(), err)
	}
}

func TestBatchConnHoldsAtMostMaxBatch(t *testing.T) {
	rc := &recordConn{}
	b := &batchConn{Conn: rc, pool: new(sync.Pool)}
	frame := bytes.Repeat([]byte("x"), 30<<10)
	b.begin()
	for range 5 {
		b.Write(frame)
		if len(*b.buf) > maxBatch {
			t.Fatalf("holding %d bytes, bound %d", len(*b.buf), maxBatch)
		}
	}
	big := bytes.Repeat([]byte("y"), maxBatch+1)
	b.Write(big)
	if err := b.end(); err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, w := range rc.got() {
		if len(w) > maxBatch && !bytes.Equal(w, big) {
			t.Fatalf("a write of %d bytes, bound %d", len(w), maxBatch)
		}
		all = append(all, w...)
	}
	want := append(bytes.Repeat(frame, 5), big...)
	if !bytes.Equal(all, want) {
		t.Fatalf("bytes out of order or lost: %d bytes, want %d", len(all), len(want))
	}
	if b.buf != nil {
		t.Fatal("the buffer is still held after the burst: an idle connection keeps it")
	}
}

// recordTransport records what the writer does, in order.
type recordTransport struct {
	mu      sync.Mutex
	calls   []string
	flushed chan struct{}
}

func (r *recordTransport) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recordTransport) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recordTransport) write(it outItem) error {
	what := it.msg.text
	if what == "" {
		what = it.msg.label
	}
	r.add("write " + what)
	return nil
}
func (r *recordTransport) begin()                        { r.add("begin") }
func (r *recordTransport) flush() error                  { r.add("flush"); r.flushed <- struct{}{}; return nil }
func (r *recordTransport) ack(string, bool, string) bool { return false }
func (r *recordTransport) direct(outItem) bool           { return false }
func (r *recordTransport) sendsJSON() bool               { return true }
func (r *recordTransport) inline() bool                  { return true }
func (r *recordTransport) pingInterval() time.Duration   { return 0 }
func (r *recordTransport) ping() error                   { return nil }
func (r *recordTransport) abort()                        {}
func (r *recordTransport) killed(int, string)            {}
func (r *recordTransport) finish(int, string)            {}

// What is queued together goes out in one burst, in order, and the burst
// is flushed as soon as the queues are empty, without waiting for more.
func TestWriterFlushesEachBurstWhenIdle(t *testing.T) {
	r := startRelay(t, Config{})
	rt := &recordTransport{flushed: make(chan struct{}, 8)}
	c := r.newConn(rt, slog.New(slog.DiscardHandler))
	for i := range 5 {
		c.enqueue(c.ctrl, outItem{msg: message{label: labelNotice, text: strconv.Itoa(i)}}, false)
	}
	done := make(chan struct{})
	go func() { defer close(done); c.writeLoop() }()
	defer func() { c.kill(1000, ""); <-done }()

	<-rt.flushed
	want := []string{"begin", "write 0", "write 1", "write 2", "write 3", "write 4", "flush"}
	if got := rt.take(); !slices.Equal(got, want) {
		t.Fatalf("writer did %q, want %q", got, want)
	}
	if err := c.notice("5"); err != nil {
		t.Fatal(err)
	}
	<-rt.flushed // a lone message is flushed at once
	if got, want := rt.take(), []string{"begin", "write 5", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("writer did %q, want %q", got, want)
	}
}

// Over a real socket, a subscriber gets every stored event in order, then
// EOSE, then a live event with nothing after it to push it out.
func TestBurstsKeepFrameOrderOverWebSocket(t *testing.T) {
	r := startRelay(t, Config{})
	k := newKey(t)
	pub := dial(t, r.url)
	var want []string
	for i := range 40 {
		ev := k.event(t, 1, r.clock.Unix()-nostr.Timestamp(i), fmt.Sprint("note ", i))
		pub.mustPublish(ev)
		want = append(want, ev.ID)
	}
	sub := dial(t, r.url)
	if got := sub.req("s", map[string]any{"kinds": []int{1}}); !slices.Equal(got, want) {
		t.Fatalf("stored events arrived as %v, want %v", got, want)
	}
	live := k.event(t, 1, r.clock.Unix(), "live")
	pub.mustPublish(live)
	m := sub.expect("EVENT")
	if got := m.event(1).ID; got != live.ID {
		t.Fatalf("live event %s, want %s", got, live.ID)
	}
}

// The reader writes its answer to a message itself when the writer is idle
// and nothing is queued before it: the EOSE of a REQ and the OK of an
// EVENT are out when process returns, with no writer goroutine to wake
// (none runs here). Behind a queued message an answer is queued in turn,
// and the writer sends both in order.
func TestReaderAnswersInPlaceWhenTheWriterIsIdle(t *testing.T) {
	r := startRelay(t, Config{})
	rt := &recordTransport{flushed: make(chan struct{}, 8)}
	c := r.newConn(rt, slog.New(slog.DiscardHandler))
	req, err := parseClientMessage([]byte(`["REQ","s",{"kinds":[7]}]`), &r.lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.process(req, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := rt.take(), []string{"begin", "write EOSE", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("after a REQ the transport got %q, want %q", got, want)
	}
	k := newKey(t)
	if err := c.process(&clientMessage{typ: msgEvent, event: k.event(t, 1, r.clock.Unix(), "note")}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := rt.take(), []string{"begin", "write OK", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("after an EVENT the transport got %q, want %q", got, want)
	}

	if err := c.notice("queued"); err != nil {
		t.Fatal(err)
	}
	if err := c.process(&clientMessage{typ: msgEvent, event: k.event(t, 1, r.clock.Unix(), "note 2")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := rt.take(); len(got) != 0 {
		t.Fatalf("an OK behind a queued notice was written in place: %q", got)
	}
	for len(rt.flushed) > 0 { // the bursts written in place
		<-rt.flushed
	}
	done := make(chan struct{})
	go func() { defer close(done); c.writeLoop() }()
	defer func() { c.kill(1000, ""); <-done }()
	<-rt.flushed
	if got, want := rt.take(), []string{"begin", "write queued", "write OK", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("writer did %q, want %q", got, want)
	}
}

// hookTransport is a recordTransport that calls onWrite after each write.
type hookTransport struct {
	recordTransport
	onWrite func(it outItem)
}

func (h *hookTransport) write(it outItem) error {
	err := h.recordTransport.write(it)
	h.onWrite(it)
	return err
}

// A reader answering in place writes its answer and nothing else: what
// publishers queue meanwhile is the writer's. Were the reader to drain the
// queues in its burst, a steady stream of live events (other clients'
// publications, written to a client that reads them barely fast enough)
// would keep it writing, reading none of its own client's messages —
// neither the CLOSE that would end the stream nor the pongs whose absence
// ends the connection.
func TestReaderWritesOnlyItsAnswerInPlace(t *testing.T) {
	r := startRelay(t, Config{})
	ht := &hookTransport{recordTransport: recordTransport{flushed: make(chan struct{}, 8)}}
	c := r.newConn(ht, slog.New(slog.DiscardHandler))
	published := 0
	ht.onWrite = func(outItem) {
		if published < 3 { // a publisher's event arrives during each write
			published++
			c.sendLive(outItem{msg: message{label: labelNotice, text: fmt.Sprintf("live %d", published)}})
		}
	}
	k := newKey(t)
	if err := c.process(&clientMessage{typ: msgEvent, event: k.event(t, 1, r.clock.Unix(), "note")}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := ht.take(), []string{"begin", "write OK", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("the reader wrote %q, want %q", got, want)
	}
	if n := c.live.len(); n != 1 {
		t.Fatalf("%d live events queued for the writer, want 1", n)
	}
	for len(ht.flushed) > 0 {
		<-ht.flushed
	}
	done := make(chan struct{})
	go func() { defer close(done); c.writeLoop() }()
	defer func() { c.kill(1000, ""); <-done }()
	<-ht.flushed
	if got, want := ht.take(), []string{"begin", "write live 1", "write live 2", "write live 3", "flush"}; !slices.Equal(got, want) {
		t.Fatalf("writer did %q, want %q", got, want)
	}
}

// pausedTransport is a WebSocket transport whose first flush once armed
// calls atFlush first: the reader answering in place is stopped there,
// wmu held and its answer in the socket's burst, not yet on the wire.
type pausedTransport struct {
	*wsTransport
	armed   atomic.Bool
	atFlush func()
}

func (p *pausedTransport) flush() error {
	if p.armed.CompareAndSwap(true, false) {
		p.atFlush()
	}
	return p.wsTransport.flush()
}

// A connection the relay closes while its reader is writing an answer in
// place still gets its close frame, after the answer: the client sees
// the code the relay meant (1001 at shutdown, 1008 for a slow client),
// not 1006. Here the writer goroutine stops (killed) and returns while
// the reader holds the burst with its OK in it; were the writer to send
// the close frame then, it would land in that burst and the socket be
// closed under it, the burst never written.
func TestCloseFrameAfterAnAnswerWrittenInPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(c *conn)
		code int
		text string
	}{
		{"shutdown", func(c *conn) { c.kill(websocket.CloseGoingAway, "relay shutting down") }, websocket.CloseGoingAway, "relay shutting down"},
		{"slow client", func(c *conn) { c.slow() }, websocket.ClosePolicyViolation, "too slow: outbound queue full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRelay(t, Config{})
			conns := make(chan *conn, 1)
			writerDone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				bw := &batchWriter{ResponseWriter: w, pool: &r.bursts}
				ws, err := r.upgrader.Upgrade(bw, req, nil)
				if err != nil {
					return
				}
				wt := &wsTransport{ws: ws, batch: bw.conn}
				pt := &pausedTransport{wsTransport: wt}
				c := r.newConn(pt, slog.New(slog.DiscardHandler))
				wt.c = c
				pt.atFlush = func() {
					tc.kill(c)
					<-writerDone // the writer has stopped, and done all it does on stopping
				}
				pt.armed.Store(true)
				go func() { defer close(writerDone); c.writeLoop() }()
				conns <- c
			}))
			defer srv.Close()
			cl := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
			c := <-conns

			// This goroutine is the connection's reader.
			ev := newKey(t).event(t, 1, r.clock.Unix(), "note")
			_ = c.process(&clientMessage{typ: msgEvent, event: ev}, nil)

			if m := cl.expect(labelOK); m.str(0) != ev.ID {
				t.Fatalf("OK for %s, want %s", m.str(0), ev.ID)
			}
			_, err := cl.readErr(5 * time.Second)
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.code || ce.Text != tc.text {
				t.Fatalf("client got %v, want close %d %q", err, tc.code, tc.text)
			}
		})
	}
}
