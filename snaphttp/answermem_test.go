package snaphttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// bigHandler answers every message with the same large response.
type bigHandler struct{ m *snap.Message }

func (h bigHandler) Serve(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message {
	return h.m
}

func (h bigHandler) Refuse(err *snap.Error) *snap.Message {
	return &snap.Message{ID: "refusal", Version: snap.ProtocolVersion, From: addr(serverKey), Type: snap.TypeResponse,
		Method: "snap/error", Payload: []byte(`{"error":{"code":` + fmt.Sprint(int(err.Code)) + `,"message":"busy"}}`),
		Timestamp: time.Now().Unix(), Sig: strings.Repeat("0", 128)}
}

// bigAnswer is a signed response of about size bytes, as a task with
// that much history is.
func bigAnswer(t testing.TB, size int) *snap.Message {
	payload := `{"task":{"id":"t","x":"` + strings.Repeat("a", size-4096) + `"}}`
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: addr(serverKey), To: addr(clientKey),
		Type: snap.TypeResponse, Method: "tasks/get", Payload: []byte(payload), Timestamp: time.Now().Unix()}
	if err := m.Sign(serverKey); err != nil {
		t.Fatal(err)
	}
	return m
}

// Peers that post and never read their answer hold no more of the node's
// memory than AnswerMemory (default 64 MiB): the answers beyond it are
// not held for WriteTimeout each (4 MiB answers to 48 addresses grew the
// live heap by about 380 MiB, twice each answer's size: the response and
// its encoding), and their peers get, within a fraction of a second, not
// an answer that times out but a small one in its place (the request was
// handled: 5001 {limit: "answer_memory", handled: true}), or, when even
// its reservation found no room before it was handled, 503 with
// Retry-After.
func TestSlowReadersHoldAtMostAnswerMemory(t *testing.T) {
	m := bigAnswer(t, snaphttp.DefaultMaxResponse)
	srv, err := snaphttp.New(snaphttp.Config{Handler: bigHandler{m}, Logger: slog.New(slog.DiscardHandler),
		MaxTCPConnsPerPeer: 1000, MaxTCPConns: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ctx, ln)
	}()
	defer func() { cancel(); <-served }()

	before := testutil.LiveHeap()
	const n = 48
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.%d.%d", 1+i/200, 1+i%200))}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	}
	// Every peer has its status line: an answer being written (whose
	// body it does not read), the small one in its place, or the refusal.
	brief, busy := 0, 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(snaphttp.DefaultWriteTimeout / 2))
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
		if err != nil {
			t.Fatalf("no answer before half the write timeout: %v", err)
		}
		switch {
		case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 && resp.ContentLength < 64<<10:
			brief++
		case resp.StatusCode == http.StatusOK:
		case resp.StatusCode == http.StatusServiceUnavailable:
			busy++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
		default:
			t.Errorf("status %d", resp.StatusCode)
		}
	}
	grew := testutil.LiveHeap() - before
	t.Logf("%d slow readers, %d answered in brief, %d refused: live heap grew %d MiB", n, brief, busy, grew>>20)
	if limit := int64(snaphttp.DefaultAnswerMemory + 16<<20); grew > limit {
		t.Errorf("the live heap grew %d MiB, want at most %d MiB", grew>>20, limit>>20)
	}
	// Sixteen answers fill AnswerMemory, unless some timed out meanwhile
	// (a slow run) and made room for others.
	if brief+busy == 0 {
		t.Errorf("every peer got its whole answer, want about %d answered in brief", n-snaphttp.DefaultAnswerMemory/snaphttp.DefaultMaxResponse)
	}
}

// bigStreams answers with big: as an event first when the transport takes
// events, whose send error it reports on sent, then as the response. Its
// refusals are a real snap.Server's.
type bigStreams struct {
	*snap.Server
	big  *snap.Message
	sent chan error
}

func (h bigStreams) Serve(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message {
	if send != nil {
		h.sent <- send(h.big)
	}
	return h.big
}

// fromAddr dials from the loopback address ip.
func fromAddr(ip string) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.DialContext
}

// A request that finds AnswerMemory full, held by a peer that reads
// nothing, is refused within a fraction of a second and never handled:
// its answer has no room reserved. A POST with SSE gets 503 with
// Retry-After before its stream starts, as a plain POST does; a
// WebSocket a signed 5003 in the answer's place, the connection going on
// with the next request. Before, the request was handled first, and its
// answer replaced by the refusal: a peer told to retry had it handled
// twice.
func TestAnswerMemoryFullRefusesAnswers(t *testing.T) {
	h := bigStreams{Server: newSNAPServer(t, nil), big: bigAnswer(t, snaphttp.DefaultMaxResponse), sent: make(chan error, 4)}
	e := start(t, nil, func(c *snaphttp.Config) {
		c.Handler = h
		c.AnswerMemory = snaphttp.DefaultMaxResponse
		c.MaxTCPConnsPerPeer = 100
	})
	host := strings.TrimPrefix(e.base, "http://")

	// A peer that posts and reads nothing holds all of AnswerMemory.
	slow, err := fromAddr("127.0.0.1")(t.Context(), "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(slow, "POST /snap HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", host)
	if resp, err := http.ReadResponse(bufio.NewReaderSize(slow, 512), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow peer's answer: %v %v", resp, err)
	}

	busy := func(t *testing.T, e *snap.Error) {
		t.Helper()
		if e == nil || e.Code != snap.CodeServiceUnavailable || e.Data["limit"] != "answer_memory" || e.Data["scope"] != "node" || e.Data["retryAfter"] != float64(1) {
			t.Errorf("refusal %v, want 5003 {retryAfter: 1, limit: answer_memory, scope: node}", e)
		}
	}
	refused := func(t *testing.T, b []byte) {
		t.Helper()
		m, err := snap.Parse(b)
		if err != nil {
			t.Fatalf("the refusal does not parse: %v\n%s", err, b)
		}
		busy(t, snap.ResponseError(m.Payload))
	}
	unhandled := func(t *testing.T) {
		t.Helper()
		select {
		case err := <-h.sent:
			t.Errorf("the request was handled (its event sent: %v), want it refused first", err)
		default:
		}
	}
	t.Run("sse", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{DialContext: fromAddr("127.0.0.2")}, Timeout: snaphttp.DefaultWriteTimeout / 2}
		req, _ := http.NewRequest("POST", e.base+"/snap", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("HTTP %d, Retry-After %q: %s; want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		busy(t, snap.ResponseError(body))
		unhandled(t)
	})
	t.Run("websocket", func(t *testing.T) {
		d := websocket.Dialer{NetDialContext: fromAddr("127.0.0.3")}
		c, _, err := d.Dial(e.ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(snaphttp.DefaultWriteTimeout / 2))
		if err := c.WriteMessage(websocket.TextMessage, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		refused(t, b)
		// The connection goes on: the next request is answered (refused
		// again, the slow peer still holding the memory), not dropped
		// with a close.
		if err := c.WriteMessage(websocket.TextMessage, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, b, err = c.ReadMessage(); err != nil {
			t.Fatalf("the second request: %v, want its answer", err)
		}
		refused(t, b)
		unhandled(t)
	})
}
