package snaphttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snaphttp"
)

// TestConnectionRefusalNamesTheCap: a connection over a cap on the TCP
// connections, none of them idle, is refused with a SNAP error whose data
// names the cap it went over (limit, and scope: "peer" or "node"), as
// the refusals of the WebSocket caps do, not a bare retryAfter.
func TestConnectionRefusalNamesTheCap(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	e := start(t, h, func(c *snaphttp.Config) { c.MaxTCPConns, c.MaxTCPConnsPerPeer = 3, 2 })
	defer close(release)
	hostport := strings.TrimPrefix(e.base, "http://")
	busy := func(src string) {
		c := dialFrom(t, src, hostport)
		t.Cleanup(func() { c.Close() })
		body := raw(t, request(t, "message/send", sendPayload))
		fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		<-entered
	}
	refusal := func(src string) (int, map[string]any) {
		c := dialFrom(t, src, hostport)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a connection from %s over the cap got no answer: %v", src, err)
		}
		defer resp.Body.Close()
		var body errorAnswer
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body.Error.Data
	}
	busy("127.0.0.2")
	busy("127.0.0.2")
	if st, d := refusal("127.0.0.2"); st != http.StatusTooManyRequests || d["limit"] != float64(2) || d["scope"] != "peer" || d["retryAfter"] != float64(1) {
		t.Errorf("over the peer's cap: %d %v, want 429 naming limit 2, scope peer, retryAfter 1", st, d)
	}
	busy("127.0.0.3")
	if st, d := refusal("127.0.0.4"); st != http.StatusServiceUnavailable || d["limit"] != float64(3) || d["scope"] != "node" || d["retryAfter"] != float64(1) {
		t.Errorf("over the node's cap: %d %v, want 503 naming limit 3, scope node, retryAfter 1", st, d)
	}
}

// TestWebSocketDataBeforeUpgradeIsRefused: a peer that sends its first
// frame with the upgrade request, before the upgrade is answered (RFC
// 6455, 4.1, says a client waits), gets 400 with a SNAP error naming the
// rule, and its connection closed; the upgrader closed it without a word.
// The connection's slot comes back.
func TestWebSocketDataBeforeUpgradeIsRefused(t *testing.T) {
	e := start(t, nil, nil)
	c := dialFrom(t, "127.0.0.1", strings.TrimPrefix(e.base, "http://"))
	defer c.Close()
	// A masked text frame "{}", in the same write as the request.
	frame := []byte{0x81, 0x82, 1, 2, 3, 4, '{' ^ 1, '}' ^ 2}
	io.WriteString(c, "GET /snap HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"+string(frame))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var body errorAnswer
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || body.Error.Code != 1003 || body.Error.Data["field"] != "message" ||
		body.Error.Data["reason"] == nil || !resp.Close {
		t.Errorf("got %d %+v (close %v), want 400, 1003 naming the field and the reason, and the connection closed", resp.StatusCode, body.Error, resp.Close)
	}
	// The slot is given back once the server closed the connection,
	// which may come just after the refusal reached the peer.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := healthFrom(t, http.DefaultClient, e)
		if got.WebSockets == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the refusal: %d WebSocket slots held, want 0", got.WebSockets)
		}
	}
}
