package snaphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// (any 127.0.0.0/8 address is this machine's), standing for a peer there.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	return c
}

// clientFrom is an HTTP client whose connections come from src.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
}

// healthFrom reads /healthz with client.
func healthFrom(t testing.TB, client *http.Client, e *env) snaphttp.Health {
	t.Helper()
	resp, err := client.Get(e.base + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	defer resp.Body.Close()
	var h snaphttp.Health
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/healthz: %d %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// 2,000 idle connections, opened from the valid peer's own address or
// from a hundred others, do not shut out /healthz or a signed request:
// over a cap, the connection idle the longest in its scope is closed to
// make room, so that the server never holds more than its caps.
func TestIdleConnectionsAreCapped(t *testing.T) {
	const total, perPeer, flood = 64, 16, 2000
	for _, tc := range []struct {
		name    string
		sources int // flooding addresses, 127.0.1.1…; 0: the peer's own
		maxOpen int // flooding connections the server may still hold
	}{
		{"from the peer's own address", 0, perPeer},
		{"from a hundred addresses", 100, total},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, nil, func(c *snaphttp.Config) { c.MaxTCPConns, c.MaxTCPConnsPerPeer = total, perPeer })
			hostport := strings.TrimPrefix(e.base, "http://")
			conns := make([]net.Conn, 0, flood)
			t.Cleanup(func() {
				for _, c := range conns {
					c.Close()
				}
			})
			for i := range flood {
				src := "127.0.0.1"
				if tc.sources > 0 {
					src = fmt.Sprintf("127.0.1.%d", 1+i%tc.sources)
				}
				conns = append(conns, dialFrom(t, src, hostport))
			}
			// Accepted in order: once /healthz answers, every flooding
			// connection has been counted or closed.
			peer := clientFrom("127.0.0.1")
			h := healthFrom(t, peer, e)
			if h.Status != "ok" || h.Connections > total || h.ConnectionsEvicted == 0 {
				t.Errorf("/healthz: %+v; want ok, at most %d connections, some evicted", h, total)
			}
			resp, err := e.client.Send(context.Background(), e.base+"/snap", request(t, "message/send", sendPayload))
			if err != nil {
				t.Fatalf("a signed request under the flood: %v", err)
			}
			if resp.Type != snap.TypeResponse || errCode(resp.Payload) != 0 {
				t.Errorf("a signed request under the flood: %s %s", resp.Type, resp.Payload)
			}
			if n := nettest.HeldOpen(conns, tc.maxOpen); n > tc.maxOpen {
				t.Errorf("the server still holds %d of %d idle connections; want at most %d", n, flood, tc.maxOpen)
			}
		})
	}
}

// When every connection of a peer is busy, its next connection is
// answered 429 with Retry-After and the SNAP error shape, and closed;
// another address is still served, and the peer is again once one of
// its requests ends.
func TestConnectionOverCapWithNoneIdle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	h := &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	e := start(t, h, func(c *snaphttp.Config) { c.MaxTCPConns, c.MaxTCPConnsPerPeer = 8, 2 })
	hostport := strings.TrimPrefix(e.base, "http://")

	// Two requests in progress from 127.0.0.2: its two connections are busy.
	busy := make([]net.Conn, 2)
	for i := range busy {
		busy[i] = dialFrom(t, "127.0.0.2", hostport)
		defer busy[i].Close()
		body := raw(t, request(t, "message/send", sendPayload))
		fmt.Fprintf(busy[i], "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	for range busy {
		<-entered
	}

	c := dialFrom(t, "127.0.0.2", hostport)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the third connection got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Status     int `json:"status"`
				RetryAfter int `json:"retryAfter"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("refusal body %q: %v", b, err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || body.Error.Data.Status != 429 ||
		body.Error.Code != int(snap.CodeRateLimitExceeded) || body.Error.Data.RetryAfter != 1 {
		t.Errorf("over the peer's cap: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the refused connection is still open")
	}

	if got := healthFrom(t, clientFrom("127.0.0.3"), e); got.Status != "ok" || got.ConnectionsRefused != 1 {
		t.Errorf("another address: %+v; want ok with 1 connection refused", got)
	}
	close(release)
	for _, c := range busy {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Errorf("a busy request: %v %v", resp, err)
		}
		c.Close()
	}
	// The server counts a connection until it has seen it close: the
	// peer is served again once it has, within moments.
	for end := time.Now().Add(5 * time.Second); ; {
		resp, err := clientFrom("127.0.0.2").Get(e.base + "/healthz")
		if err != nil {
			t.Fatalf("/healthz: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(end) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := healthFrom(t, clientFrom("127.0.0.2"), e); got.Status != "ok" {
		t.Errorf("the peer once its requests ended: %+v", got)
	}
}

// A connection that does not finish its headers within HeaderTimeout is
// closed.
func TestHeaderTimeout(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.HeaderTimeout = 50 * time.Millisecond })
	c := dialFrom(t, "127.0.0.1", strings.TrimPrefix(e.base, "http://"))
	defer c.Close()
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after 5s (header timeout 50ms); read %q", b)
	}
}

// signedOfSize is a signed message/send of about n bytes.
func signedOfSize(t testing.TB, n int) []byte {
	t.Helper()
	text := strings.Repeat("a", n)
	return raw(t, request(t, "message/send", `{"message":{"messageId":"m-big","role":"user","parts":[{"text":"`+text+`"}]}}`))
}

// The bodies held at once are bounded: of 100 large requests posted at
// once by 100 peers, those beyond BodyMemory get 429 with Retry-After and the SNAP
// error shape before their body is read; those within it are answered;
// and the memory is free again afterwards.
func TestBodyMemory(t *testing.T) {
	const n, fit = 100, 4
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = signedOfSize(t, 200<<10)
	}
	body := bodies[0]
	release := make(chan struct{})
	entered := make(chan struct{}, n)
	h := &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	e := start(t, h, func(c *snaphttp.Config) {
		c.MaxBody = 512 << 10
		c.BodyMemory = int64(fit*len(body) + len(body)/2)
		c.Rate, c.Burst = 1000, 1000
	})
	type answer struct {
		status int
		retry  string
		body   []byte
	}
	answers := make(chan answer, n)
	for i, body := range bodies {
		go func() {
			client := clientFrom(fmt.Sprintf("127.0.5.%d", 1+i)) // 100 peers
			resp, err := client.Post(e.base+"/snap", "application/json", bytes.NewReader(body))
			if err != nil {
				answers <- answer{status: -1, body: []byte(err.Error())}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), b}
		}()
	}
	timeout := time.After(10 * time.Second)
	for i := range n - fit {
		select {
		case a := <-answers:
			if a.status != 429 || a.retry != "1" || !strings.Contains(string(a.body), `"code":5003`) ||
				!strings.Contains(string(a.body), `"retryAfter":1`) {
				t.Fatalf("answer %d beyond the bodies' memory: %d Retry-After %q %s", i, a.status, a.retry, a.body)
			}
		case <-timeout:
			t.Fatalf("%d of %d requests beyond the bodies' memory were answered 429 in 10s; %d reached the handler", i, n-fit, len(entered))
		}
	}
	for i := range fit {
		select {
		case <-entered:
		case a := <-answers:
			t.Fatalf("request %d within the bodies' memory was answered before its handler ran: %d %.300s", i, a.status, a.body)
		}
	}
	close(release)
	for range fit {
		if a := <-answers; a.status != 200 {
			t.Errorf("a request within the bodies' memory: %d %s", a.status, a.body)
		}
	}
	if len(entered) != 0 {
		t.Errorf("%d more requests reached the handler than fit", len(entered))
	}
	// Released: as many fit again, one after the other.
	client := clientFrom("127.0.0.1")
	for range fit + 1 {
		resp, err := client.Post(e.base+"/snap", "application/json", bytes.NewReader(signedOfSize(t, 200<<10)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("after the flood: %d", resp.StatusCode)
		}
	}
}

// One peer holds at most its share of BodyMemory: its next body gets 429
// (scope "peer") while another peer's is read.
func TestBodyMemoryPerPeer(t *testing.T) {
	h, entered, release := holdFirst()
	// A peer's share: a sixteenth of 1 MiB, 64 KiB; a body, 40 KiB.
	e := start(t, h, func(c *snaphttp.Config) { c.MaxBody = 64 << 10; c.BodyMemory = 1 << 20 })
	postFrom := func(src string) (int, string) {
		return postBody(t, e, src, bytes.NewReader(signedOfSize(t, 40<<10)))
	}
	first := make(chan int, 1)
	go func() { st, _ := postFrom("127.0.0.2"); first <- st }()
	<-entered // the first body is held while its request is handled
	if st, b := postFrom("127.0.0.2"); st != 429 || !strings.Contains(b, `"scope":"peer"`) || !strings.Contains(b, `"code":5003`) {
		t.Errorf("the same peer over its share: %d %s", st, b)
	}
	if st, b := postFrom("127.0.0.3"); st != 200 {
		t.Errorf("another peer: %d %s", st, b)
	}
	close(release)
	if st := <-first; st != 200 {
		t.Errorf("the first body: %d", st)
	}
	if st, b := postFrom("127.0.0.2"); st != 200 {
		t.Errorf("the peer once its body was answered: %d %s", st, b)
	}
}

// A WebSocket message waits for its share of BodyMemory, rather than
// being read: with the memory held by a posted body, the message is
// answered only once that body is.
func TestBodyMemoryWebSocketWaits(t *testing.T) {
	body := signedOfSize(t, 64<<10)
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	var calls atomic.Int32
	h := &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		if calls.Add(1) > 1 {
			return // the WebSocket message: answered at once
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	e := start(t, h, func(c *snaphttp.Config) { c.MaxBody = 128 << 10; c.BodyMemory = 128 << 10 })
	posted := make(chan int, 1)
	go func() {
		resp, err := http.Post(e.base+"/snap", "application/json", bytes.NewReader(body))
		if err != nil {
			posted <- -1
			return
		}
		resp.Body.Close()
		posted <- resp.StatusCode
	}()
	<-entered // the posted body holds the memory
	ws, _, err := websocket.DefaultDialer.Dial(e.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		_, b, _ := ws.ReadMessage()
		got <- b
	}()
	select {
	case b := <-got:
		t.Fatalf("the WebSocket message was answered while the memory was held: %s", b)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if st := <-posted; st != 200 {
		t.Errorf("the posted body: %d", st)
	}
	select {
	case b := <-got:
		verify(t, b)
	case <-time.After(5 * time.Second):
		t.Fatal("the WebSocket message was not answered once the memory was free")
	}
}

// The default caps follow the open-file limit.
func TestDefaultTCPConns(t *testing.T) {
	for _, tc := range []struct {
		nofile         uint64
		total, perPeer int
	}{
		{0, 512, 32}, {1024, 512, 32}, {100, 64, 8}, {4096, 2048, 128}, {1 << 20, 16384, 1024},
	} {
		total, perPeer := snaphttp.DefaultTCPConns(tc.nofile)
		if total != tc.total || perPeer != tc.perPeer {
			t.Errorf("DefaultTCPConns(%d) = %d, %d; want %d, %d", tc.nofile, total, perPeer, tc.total, tc.perPeer)
		}
	}
}

// A body posted without a length holds MaxBody of its peer's share while
// it is read, and only its own length once read: a small chunked message
// handled for long leaves the peer room for its next one.
func TestBodyMemoryChunkedKeepsItsLength(t *testing.T) {
	h, entered, release := holdFirst()
	// A peer's share: a sixteenth of 1 MiB, 64 KiB, one MaxBody.
	e := start(t, h, func(c *snaphttp.Config) { c.MaxBody = 64 << 10; c.BodyMemory = 1 << 20 })
	post := func(body io.Reader) (int, string) { return postBody(t, e, "127.0.0.2", body) }
	first := make(chan int, 1)
	small := signedOfSize(t, 1<<10)
	go func() {
		// A reader of unknown length: the client sends it chunked.
		st, _ := post(io.MultiReader(bytes.NewReader(small)))
		first <- st
	}()
	<-entered // the first body is held while its request is handled
	if st, b := post(bytes.NewReader(signedOfSize(t, 40<<10))); st != 200 {
		t.Errorf("a 40 KiB body beside a held chunked 1 KiB one: %d %s", st, b)
	}
	close(release)
	if st := <-first; st != 200 {
		t.Errorf("the chunked body: %d", st)
	}
}

// holdFirst is a handler whose first message is held until release is
// closed (or its request ends), the others answered at once; entered
// gets a value as each message reaches it.
func holdFirst() (h *hooks, entered chan struct{}, release chan struct{}) {
	release = make(chan struct{})
	entered = make(chan struct{}, 3)
	var calls atomic.Int32
	h = &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		if calls.Add(1) > 1 {
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	return h, entered, release
}

// postBody posts body to e's /snap from the address src and returns the
// status and the body of the answer.
func postBody(t *testing.T, e *env, src string, body io.Reader) (int, string) {
	t.Helper()
	resp, err := clientFrom(src).Post(e.base+"/snap", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A request's headers are bounded (snaphttp.MaxHeaderBytes): a header
// block past the bound is refused with 431 and its connection closed,
// not read and held. The headers of a request are held while it is
// answered, and those of a WebSocket upgrade for as long as the
// connection is open, so without a bound of its own each of the node's
// connections could hold net/http's default of 1 MiB of them (512
// connections at the common open-file limit: 512 MiB), beside the
// BodyMemory that bounds the messages. Headers of ordinary size pass.
func TestHeaderBytesAreBounded(t *testing.T) {
	e := start(t, nil, nil)
	get := func(headerBytes int) (int, error) {
		c := dialFrom(t, "127.0.0.1", strings.TrimPrefix(e.base, "http://"))
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		go func() {
			var b strings.Builder
			b.WriteString("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
			line := "X-Pad-%06d: " + strings.Repeat("a", 1000) + "\r\n"
			for n := 0; b.Len() < headerBytes; n++ {
				fmt.Fprintf(&b, line, n)
			}
			b.WriteString("Connection: close\r\n\r\n")
			io.WriteString(c, b.String()) // may fail once the server refuses
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if st, err := get(8 << 10); err != nil || st != http.StatusOK {
		t.Fatalf("8 KiB of headers: %d, %v; want 200", st, err)
	}
	if st, err := get(snaphttp.MaxHeaderBytes + 8<<10); err != nil || st != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("%d bytes of headers (over the bound of %d): %d, %v; want 431", snaphttp.MaxHeaderBytes+8<<10, snaphttp.MaxHeaderBytes, st, err)
	}
	if st, err := get(512 << 10); err != nil || st != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("512 KiB of headers: %d, %v; want 431", st, err)
	}
}

// A request whose body never comes is answered, or its connection closed,
// within ReadTimeout on every route, not only where a handler reads the
// body: net/http reads what a handler left unread of a small body (up to
// 256 KiB) before it writes the answer, and with no read deadline that
// read waited for ever, the connection busy (never idle, so never closed
// to make room): a peer's stalled requests held its share of the
// connections, and sixteen peers all of them, for as long as they liked.
func TestUnreadBodyIsTimedOut(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.ReadTimeout = 100 * time.Millisecond
		c.MaxTCPConns, c.MaxTCPConnsPerPeer = 64, 2
		c.Burst, c.Rate = 1, 0.001
	})
	host := strings.TrimPrefix(e.base, "http://")
	// The rate-limit token of 127.0.0.2 is spent, so its POST /snap is
	// refused before its body is read.
	if st, _ := postBody(t, e, "127.0.0.2", strings.NewReader("{}")); st != http.StatusOK {
		t.Fatalf("first POST: %d, want 200 (a SNAP error)", st)
	}
	for _, req := range []struct{ src, line string }{
		{"127.0.0.3", "GET /healthz"},
		{"127.0.0.3", "GET /nowhere"},
		{"127.0.0.4", "GET " + snaphttp.WellKnownPath},
		{"127.0.0.4", "DELETE /snap"},
		{"127.0.0.5", "GET /snap"},
		{"127.0.0.2", "POST /snap"},
	} {
		c := dialFrom(t, req.src, host)
		fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", req.line)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		defer c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s with a body that never comes: neither answered nor closed after 5 s (ReadTimeout 100ms); read %q", req.line, b)
		}
	}
	// The stalled connections, still open on the peer's side, are gone
	// from the server's: the peer is below its cap again.
	if h := healthFrom(t, clientFrom("127.0.0.3"), e); h.Status != "ok" {
		t.Fatalf("/healthz: %+v", h)
	}
}
