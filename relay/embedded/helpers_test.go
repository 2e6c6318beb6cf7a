package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// testNow is the fake clock's starting time.
const testNow = 1_700_000_000

// fakeClock is an injectable clock, moved by hand.
type fakeClock struct{ unix atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.unix.Store(testNow)
	return c
}

func (c *fakeClock) Now() time.Time        { return time.Unix(c.unix.Load(), 0) }
func (c *fakeClock) Advance(s int64)       { c.unix.Add(s) }
func (c *fakeClock) Unix() nostr.Timestamp { return nostr.Timestamp(c.unix.Load()) }

// testRelay is a relay served on 127.0.0.1:0 for one test.
type testRelay struct {
	*Relay
	url   string
	clock *fakeClock
	stop  func() // cancels Serve and waits for it
}

func startRelay(t testing.TB, cfg Config) *testRelay {
	t.Helper()
	return startRelayExempt(t, cfg, netip.Addr.IsLoopback)
}

// startRelayExempt is startRelay with the peers exempt from
// MaxConnectionsPerIP given (nil: none, so that clients on loopback
// addresses are capped as peers elsewhere are).
func startRelayExempt(t testing.TB, cfg Config, exempt func(netip.Addr) bool) *testRelay {
	t.Helper()
	clock := newClock()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	r, err := newRelay(cfg, exempt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	for r.Addr() == nil { // Serve records the address first thing
		time.Sleep(time.Millisecond)
	}
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(func() {
		stop()
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testRelay{Relay: r, url: WebSocketURL(ln.Addr()), clock: clock, stop: stop}
}

// client is a raw NIP-01 client over a gorilla WebSocket.
type client struct {
	t  testing.TB
	ws *websocket.Conn
}

func dial(t testing.TB, url string) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// frontRelay serves r behind a server that gives each client the remote
// address it names in an X-Test-From header, as a proxy that sets the
// remote address would (the tests' clients all come from 127.0.0.1),
// and returns its WebSocket URL.
func frontRelay(t testing.TB, r *Relay) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if ip := req.Header.Get("X-Test-From"); ip != "" {
			req.RemoteAddr = net.JoinHostPort(ip, "40000")
		}
		r.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// frontRelaySmallSendBuffer is frontRelay, its connections to clients
// sending through a 4 KiB buffer: with a client of dialFromSmallBuffer
// that reads nothing, the sockets between them take a few KiB, and the
// relay's write of a larger message never ends (until the client goes or
// the write times out).
func frontRelaySmallSendBuffer(t testing.TB, r *Relay) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if ip := req.Header.Get("X-Test-From"); ip != "" {
			req.RemoteAddr = net.JoinHostPort(ip, "40000")
		}
		r.ServeHTTP(w, req)
	}))
	srv.Listener = smallSendListener{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// smallSendListener gives the TCP connections it accepts a 4 KiB send
// buffer.
type smallSendListener struct{ net.Listener }

func (l smallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(4096); err != nil {
			c.Close()
			return nil, fmt.Errorf("set the send buffer: %w", err)
		}
	}
	return c, nil
}

// waitUntil polls cond until it holds. Nothing but the test's own
// deadline (go test -timeout) bounds the wait: a loaded machine may take
// long, and a wait that never ends fails there with what state says.
func waitUntil(t *testing.T, cond func() bool, state func() string) {
	t.Helper()
	deadline, ok := t.Deadline()
	for !cond() {
		if ok && time.Until(deadline) < 5*time.Second {
			t.Fatalf("still waiting at the test's deadline: %s", state())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialFrom connects to a frontRelay's url as a client at address ip
// (loopback when ""); a client refused gets nil and the HTTP status.
func dialFrom(t testing.TB, url, ip string) (*client, int) {
	t.Helper()
	h := http.Header{}
	if ip != "" {
		h.Set("X-Test-From", ip)
	}
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		if resp == nil {
			t.Fatalf("dial from %q: %v", ip, err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}, http.StatusSwitchingProtocols
}

// mustDialFrom is dialFrom, failing the test when the client is refused.
func mustDialFrom(t testing.TB, url, ip string) *client {
	t.Helper()
	c, code := dialFrom(t, url, ip)
	if c == nil {
		t.Fatalf("from %q: refused with %d", ip, code)
	}
	return c
}

// dialSmallBuffer connects with a 4 KiB receive buffer, so that a client
// that stops reading fills its socket quickly.
func dialSmallBuffer(t testing.TB, url string) *client {
	t.Helper()
	return dialFromSmallBuffer(t, url, "")
}

// dialFromSmallBuffer is dialSmallBuffer to a frontRelay's url, as a
// client at address ip (loopback when "").
func dialFromSmallBuffer(t testing.TB, url, ip string) *client {
	t.Helper()
	d := websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}).DialContext}
	h := http.Header{}
	if ip != "" {
		h.Set("X-Test-From", ip)
	}
	ws, _, err := d.Dial(url, h)
	if err != nil {
		t.Fatalf("dial %s from %q: %v", url, ip, err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

func (c *client) send(v ...any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// msg is one relay message: its type and raw elements.
type msg struct {
	typ  string
	args []json.RawMessage
}

func (m msg) str(i int) string {
	var s string
	_ = json.Unmarshal(m.args[i], &s)
	return s
}

func (m msg) event(i int) *nostr.Event {
	var ev nostr.Event
	if err := json.Unmarshal(m.args[i], &ev); err != nil {
		panic(err)
	}
	return &ev
}

// read reads the next message, failing the test after 5 s.
func (c *client) read() msg {
	c.t.Helper()
	m, err := c.readErr(5 * time.Second)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

// readErr reads the next message, waiting at most timeout; 0: with no
// deadline (the test's own, go test -timeout, bounds the wait).
func (c *client) readErr(timeout time.Duration) (msg, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	_ = c.ws.SetReadDeadline(deadline)
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		return msg{}, err
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) == 0 {
		return msg{}, errors.New("bad relay message: " + string(b))
	}
	var typ string
	_ = json.Unmarshal(arr[0], &typ)
	return msg{typ: typ, args: arr[1:]}, nil
}

func (c *client) expect(typ string) msg {
	c.t.Helper()
	m := c.read()
	if m.typ != typ {
		c.t.Fatalf("got %s %s, want %s", m.typ, joinRaw(m.args), typ)
	}
	return m
}

func joinRaw(a []json.RawMessage) string {
	s := make([]string, len(a))
	for i, r := range a {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// publish sends ev and returns its OK answer (accepted, message).
func (c *client) publish(ev *nostr.Event) (bool, string) {
	c.t.Helper()
	c.send("EVENT", ev)
	m := c.expect("OK")
	if got := m.str(0); got != ev.ID {
		c.t.Fatalf("OK for %s, want %s", got, ev.ID)
	}
	var ok bool
	_ = json.Unmarshal(m.args[1], &ok)
	return ok, m.str(2)
}

// publishErr sends ev and waits for its OK with no deadline (the test's
// own bounds it); it fails no test, so it may run in any goroutine of the
// test's: an error, or an event refused, is returned.
func (c *client) publishErr(ev *nostr.Event) error {
	b, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		return err
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	m, err := c.readErr(0)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	var ok bool
	if m.typ != "OK" || len(m.args) < 3 || m.str(0) != ev.ID || json.Unmarshal(m.args[1], &ok) != nil {
		return fmt.Errorf("got %s %s, want OK for %s", m.typ, joinRaw(m.args), ev.ID)
	}
	if !ok {
		return fmt.Errorf("publish refused: %s", m.str(2))
	}
	return nil
}

func (c *client) mustPublish(ev *nostr.Event) {
	c.t.Helper()
	if ok, why := c.publish(ev); !ok {
		c.t.Fatalf("publish refused: %s", why)
	}
}

// req subscribes and returns the ids of the stored events, in order,
// checking that EOSE ends them.
func (c *client) req(subID string, filters ...any) []string {
	c.t.Helper()
	c.send(append([]any{"REQ", subID}, filters...)...)
	var ids []string
	for {
		m := c.read()
		switch m.typ {
		case "EVENT":
			if m.str(0) != subID {
				c.t.Fatalf("EVENT for %q, want %q", m.str(0), subID)
			}
			ids = append(ids, m.event(1).ID)
		case "EOSE":
			if m.str(0) != subID {
				c.t.Fatalf("EOSE for %q, want %q", m.str(0), subID)
			}
			return ids
		default:
			c.t.Fatalf("got %s %s during REQ", m.typ, joinRaw(m.args))
		}
	}
}

// key is a test signer.
type key struct{ sk, pk string }

func newKey(t testing.TB) key {
	sk := nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return key{sk, pk}
}

// event signs a new event.
func (k key) event(t testing.TB, kind int, created nostr.Timestamp, content string, tags ...nostr.Tag) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{PubKey: k.pk, CreatedAt: created, Kind: kind, Tags: nostr.Tags(tags), Content: content}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	if err := ev.Sign(k.sk); err != nil {
		t.Fatal(err)
	}
	return ev
}

func ids(evs ...*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// testBound is the default bound of a relay's store.
var testBound = storeBound{events: DefaultStoreMaxEvents, bytes: DefaultStoreMaxBytes}
