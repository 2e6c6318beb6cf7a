package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// hostileRelay is a WebSocket server that speaks NIP-01 badly: it hands
// every frame it reads to its script, which may write anything back.
type hostileRelay struct {
	url string
	// script runs in the connection's reader for each frame read; write
	// sends one text frame.
	script func(frame []byte, write func([]byte) error)
}

func newHostileRelay(t *testing.T, script func(frame []byte, write func([]byte) error)) *hostileRelay {
	t.Helper()
	h := &hostileRelay{script: script}
	upgrader := websocket.Upgrader{}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed bool
		conns  []*websocket.Conn
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		defer ws.Close()
		write := func(b []byte) error {
			_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			return ws.WriteMessage(websocket.TextMessage, b)
		}
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			h.script(msg, write)
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		closed = true
		for _, ws := range conns {
			ws.Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	h.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return h
}

// silent reads and answers nothing: no OK, no EOSE.
func silent([]byte, func([]byte) error) {}

// A relay that takes events and never answers OK no longer holds up a
// publication another relay accepted: Publish waited for every relay's
// answer, so each of the inbox's replies held its worker for the whole
// PublishTimeout (10 s), and with 8 workers one such relay among the
// node's let it answer under one request a second.
func TestPublishDoesNotWaitForASilentRelay(t *testing.T) {
	good := newITRelay(t)
	bad := newHostileRelay(t, silent)
	p := NewPool(PoolConfig{URLs: []string{good.url, bad.url}, Logger: ptLogger(), PublishTimeout: time.Hour})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "both relays connected", func() bool {
		return itState(p, good.url) == StateConnected && itState(p, bad.url) == StateConnected
	})
	type result struct {
		res PublishResult
		err error
	}
	done := make(chan result, 1)
	ev := ptEvent(t, ptNow(), "reply")
	go func() {
		res, err := p.Publish(context.Background(), *ev)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if o := r.res.Relays; r.res.Accepted() != 1 || !o[0].OK || o[1].OK || !errors.Is(o[1].Err, ErrAnswerPending) {
			t.Fatalf("outcomes %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits for the relay that never answers, another having accepted")
	}
	// The answers still awaited are bounded: past MaxPendingAnswers the
	// relay is no longer awaited.
	for i := range MaxPendingAnswers + 10 {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), fmt.Sprint("reply ", i)))
		if err != nil || !errors.Is(res.Relays[1].Err, ErrAnswerPending) {
			t.Fatalf("publication %d: %v, %+v", i, err, res.Relays)
		}
	}
	if n := p.relays[1].pendingAnswers.Load(); n != MaxPendingAnswers {
		t.Fatalf("%d answers awaited, want %d", n, MaxPendingAnswers)
	}
	p.Close() // stops them
	if n := p.relays[1].pendingAnswers.Load(); n != 0 {
		t.Fatalf("%d answers awaited after Close", n)
	}
}

// logBytes is a slog handler that counts what it would write.
type logBytes struct {
	mu    sync.Mutex
	n     int
	lines int
	buf   bytes.Buffer
	inner slog.Handler
}

func newLogBytes() *logBytes {
	l := &logBytes{}
	l.inner = slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return l
}

func (l *logBytes) Enabled(context.Context, slog.Level) bool { return true }
func (l *logBytes) WithAttrs(as []slog.Attr) slog.Handler {
	return &logAttrs{l: l, h: l.inner.WithAttrs(as)}
}
func (l *logBytes) WithGroup(string) slog.Handler { return l }
func (l *logBytes) Handle(ctx context.Context, r slog.Record) error {
	return l.handle(ctx, l.inner, r)
}

func (l *logBytes) handle(ctx context.Context, h slog.Handler, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Level < slog.LevelInfo {
		return nil // what an operator's default level writes
	}
	before := l.buf.Len()
	err := h.Handle(ctx, r)
	l.n += l.buf.Len() - before
	l.lines++
	if l.buf.Len() > 1<<20 {
		l.buf.Reset()
	}
	return err
}

func (l *logBytes) written() (bytes, lines int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.lines
}

type logAttrs struct {
	l *logBytes
	h slog.Handler
}

func (a *logAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (a *logAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &logAttrs{l: a.l, h: a.h.WithAttrs(as)}
}
func (a *logAttrs) WithGroup(string) slog.Handler { return a }
func (a *logAttrs) Handle(ctx context.Context, r slog.Record) error {
	return a.l.handle(ctx, a.h, r)
}

var _ = nostr.Timestamp(0)
