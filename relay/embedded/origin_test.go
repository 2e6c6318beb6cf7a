package embedded

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// upgradeFrom opens a WebSocket to url as a page of origin does (none
// when ""), and returns the status of the upgrade's answer and its body.
func upgradeFrom(t *testing.T, url, origin string) (int, string) {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
		h.Set("Sec-Fetch-Mode", "websocket")
	}
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if ws != nil {
		ws.Close()
	}
	if resp == nil {
		t.Fatalf("upgrade from %q: %v", origin, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A relay on loopback takes clients without Origin and pages of loopback
// origins, and refuses other pages with 403 naming the setting: a page
// in the operator's browser could otherwise publish requests to the node
// (or, rebinding its own name to 127.0.0.1, be of the relay's "origin").
// AllowedOrigins adds origins, "*" all of them.
func TestLoopbackRelayRefusesForeignPages(t *testing.T) {
	r := startRelay(t, Config{})
	port := r.url[strings.LastIndex(r.url, ":")+1:]
	for origin, want := range map[string]int{
		"":                              101,
		"http://localhost:5173":         101,
		"https://localhost":             101,
		"http://app.localhost:1":        101,
		"http://127.0.0.1:8080":         101,
		"http://[::1]:3000":             101,
		"https://evil.example":          403,
		"http://evil.example:" + port:   403, // DNS rebinding
		"null":                          403,
		"http://localhost.evil.example": 403,
	} {
		got, body := upgradeFrom(t, r.url, origin)
		if got != want {
			t.Errorf("upgrade from %q: %d, want %d", origin, got, want)
		}
		if got == http.StatusForbidden && !strings.Contains(body, "relay_allowed_origins") {
			t.Errorf("refusal of %q: %q does not name relay_allowed_origins", origin, body)
		}
	}

	listed := startRelay(t, Config{AllowedOrigins: []string{"https://client.example"}})
	for origin, want := range map[string]int{"https://client.example": 101, "http://localhost:1": 101, "https://evil.example": 403} {
		if got, _ := upgradeFrom(t, listed.url, origin); got != want {
			t.Errorf("a relay allowing https://client.example: upgrade from %q: %d, want %d", origin, got, want)
		}
	}
	open := startRelay(t, Config{AllowedOrigins: []string{"*"}})
	if got, _ := upgradeFrom(t, open.url, "https://evil.example"); got != 101 {
		t.Errorf(`a relay allowing "*": %d, want 101`, got)
	}
	if _, err := New(Config{AllowedOrigins: []string{"client.example"}}); err == nil {
		t.Error("New with an origin that is none: no error")
	}
}

// A relay listening on every interface is a public relay: web clients of
// any origin connect, as to any Nostr relay.
func TestPublicRelayTakesEveryOrigin(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()
	url := "ws://" + net.JoinHostPort("127.0.0.1", portOf(ln.Addr()))
	if got, body := upgradeFrom(t, url, "https://nostr-client.example"); got != 101 {
		t.Errorf("a public relay: upgrade from a web client: %d %s, want 101", got, body)
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
