package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// terminalControls returns the ASCII controls of s a terminal acts on:
// every one but the line feed and the tab.
func terminalControls(s string) string {
	var found []string
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			found = append(found, fmt.Sprintf("%q", r))
		}
	}
	return strings.Join(found, " ")
}

// TestPeerTextCannotDriveTerminal: a hostile agent's text that the
// client commands report on stderr (an HTTP error's body, a WebSocket
// close reason, the message of a SNAP error in a refused response) is
// shown with its control characters escaped: an escape sequence would
// retitle the window, clear the screen or write to the clipboard, and a
// carriage return would hide what was printed before it.
func TestPeerTextCannotDriveTerminal(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, otherSecret)
	agentKey, err := identity.FromHex(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	const evil = "\x1b]0;pwned\a\x1b[2J\x1b]52;c;ZXZpbA==\a\rall good"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case websocket.IsWebSocketUpgrade(r):
			c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			c.ReadMessage()
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, evil))
		case r.URL.Path == "/status":
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, evil)
		default:
			// A response signed by the agent but addressed to no one (over HTTP, where nothing else binds it to the requester),
			// carrying a SNAP error whose message is the escape.
			m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeResponse, Method: "message/send",
				From: testAddress, Timestamp: time.Now().Unix(),
				Payload: []byte(`{"error":{"code":2001,"message":"\u001b]0;pwned\u0007\u001b[2J\rall good"}}`)}
			if err := m.Sign(agentKey); err != nil {
				t.Error(err)
				return
			}
			b, _ := m.MarshalJSON()
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
		}
	}))
	defer srv.Close()
	for name, endpoint := range map[string]string{
		"http-status": srv.URL + "/status",
		"websocket":   "ws" + strings.TrimPrefix(srv.URL, "http"),
		"unaddressed": srv.URL,
	} {
		t.Run(name, func(t *testing.T) {
			r := runTerminal(t, "", "send", "--key", key, "--to", testAddress, "--http", endpoint, "--timeout", "10s", "hi")
			if r.code == exitOK {
				t.Fatalf("the hostile answer was taken:\n%s", r)
			}
			if !strings.Contains(r.stderr, "pwned") {
				t.Fatalf("the peer's text is not reported:\n%s", r)
			}
			if c := terminalControls(r.stderr + r.stdout); c != "" {
				t.Errorf("the peer's controls %s reach the terminal:\n%q", c, r.stderr)
			}
		})
	}
}

// TestSilentAgentSaysWhatToDo: an agent that takes the connection, or the
// request, and never answers is given up after --timeout, over HTTP,
// WebSocket and Nostr alike (exit 3), and the error says what happened
// and what to do: it did not answer within the time-out, it may be offline
// or busy, and a longer --timeout is the way to wait longer.
func TestSilentAgentSaysWhatToDo(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, otherSecret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			c.ReadMessage() // the request, never answered
			c.ReadMessage() // until the client leaves
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // headers, and no body
	}))
	defer srv.Close()

	// A relay holding the agent's card, and no agent behind it.
	relayURL := relayWithCard(t, dir, &snap.Card{Name: "silent", Description: "never answers", Version: "1.0.0", Identity: testAddress,
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"test"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}})

	for name, via := range map[string][]string{
		"http":      {"--http", srv.URL},
		"websocket": {"--http", "ws" + strings.TrimPrefix(srv.URL, "http")},
		"nostr":     {"--relay", relayURL},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"send", "--key", key, "--to", testAddress, "--timeout", "1s"}, via...)
			r := runCLI(t, "", append(args, "hi")...)
			if r.code != exitTimeout {
				t.Fatalf("exit %d, want %d:\n%s", r.code, exitTimeout, r)
			}
			for _, want := range []string{"did not answer within --timeout 1s", "give a longer --timeout"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}

// TestFallbackRefusesPrivateEndpoints: with --fallback, a card found on the
// relays, which anyone can publish, does not make the command post into
// the user's machine or network: an endpoint on a loopback address, or
// whose name resolves to one (localhost), over HTTP or WebSocket, is not
// connected to, and stderr names the endpoint, why, and the flag that
// allows it; --private-endpoints does.
func TestFallbackRefusesPrivateEndpoints(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, otherSecret)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "an internal service", http.StatusForbidden)
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	endpoints := []snap.Endpoint{
		{Protocol: "http", URL: srv.URL + "/admin"},
		{Protocol: "http", URL: "http://localhost:" + port + "/snap"},
		{Protocol: "wss", URL: "ws://127.0.0.1:" + port + "/ws"},
	}
	relayURL := relayWithCard(t, dir, &snap.Card{Name: "hostile", Description: "points inward", Version: "1.0.0", Identity: testAddress,
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"test"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Endpoints: endpoints})

	r := runCLI(t, "", "send", "--fallback", "--key", key, "--to", testAddress, "--relay", relayURL, "--timeout", "10s", "hi")
	if r.code == exitOK {
		t.Fatalf("exit %d:\n%s", r.code, r)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the card's loopback endpoints got %d requests, want none:\n%s", n, r)
	}
	for _, ep := range endpoints {
		if !strings.Contains(r.stderr, "not connecting to "+ep.URL) {
			t.Errorf("stderr does not name the refused endpoint %s:\n%s", ep.URL, r.stderr)
		}
	}
	for _, want := range []string{"is loopback", "--private-endpoints"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}

	r = runCLI(t, "", "send", "--fallback", "--private-endpoints", "--key", key, "--to", testAddress, "--relay", relayURL, "--timeout", "10s", "hi")
	if hits.Load() == 0 {
		t.Fatalf("--private-endpoints: the card's endpoints got no request:\n%s", r)
	}
	if strings.Contains(r.stderr, "not connecting to") {
		t.Errorf("--private-endpoints: an endpoint refused:\n%s", r.stderr)
	}

	r = runCLI(t, "", "send", "--private-endpoints", "--key", key, "--to", testAddress, "--relay", relayURL, "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--private-endpoints is for --fallback") {
		t.Errorf("--private-endpoints without --fallback: %s", r)
	}
}

// relayWithCard starts an embedded relay holding card, signed by the key
// of testSecret, and returns its URL.
func relayWithCard(t *testing.T, dir string, card *snap.Card) string {
	t.Helper()
	agentKey, err := identity.FromHex(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	relayURL := relaytest.Serve(t, embedded.Config{DBPath: filepath.Join(dir, "relay.db")})
	rctx, rcancel := context.WithCancel(context.Background())
	t.Cleanup(rcancel)
	ev, err := snapnostr.CardEvent(card, agentKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{relayURL}, Logger: slog.New(slog.DiscardHandler)})
	pool.Start(rctx)
	defer pool.Close()
	pctx, pcancel := context.WithTimeout(rctx, 20*time.Second)
	defer pcancel()
	if _, err := pool.Publish(pctx, ev); err != nil {
		t.Fatal(err)
	}
	return relayURL
}

// TestTakenRequestSaysHowToCheck: an agent's endpoint that takes a
// message and answers HTTP 500 without a SNAP response (as an agent of
// the reference SDK answers when its handler failed, perhaps after it
// made or continued the task) leaves the command saying so: the agent
// may have made or continued the task, sending again could do it twice,
// and how to check (task get of the task continued, the idempotency key
// that finds the task on an agent that keeps keys). With --fallback the
// message is posted once. So for a WebSocket endpoint that reads the
// message and cuts the connection without an answer, and for an HTTP
// endpoint that reads the POST and closes the connection before its
// status line. A tasks/get answered so is only an error.
func TestTakenRequestSaysHowToCheck(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, otherSecret)
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"Internal server error"}`))
	}))
	defer srv.Close()
	// A WebSocket endpoint that reads the request and cuts the connection
	// without an answer.
	up := websocket.Upgrader{}
	wsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := c.ReadMessage(); err == nil {
			posts.Add(1)
		}
	}))
	defer wsSrv.Close()
	wsURL := "ws" + strings.TrimPrefix(wsSrv.URL, "http")
	// An HTTP endpoint that reads the POST and closes the connection
	// before its status line.
	cutSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		posts.Add(1)
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	defer cutSrv.Close()
	relayURL := relayWithCard(t, dir, &snap.Card{Name: "sdk", Description: "answers 500", Version: "1.0.0", Identity: testAddress,
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"test"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Endpoints: []snap.Endpoint{{Protocol: "http", URL: srv.URL + "/"}}})

	for _, tc := range []struct {
		name  string
		args  []string
		posts int32
		want  []string
	}{
		{"send", []string{"send", "--http", srv.URL, "hi"}, 1,
			[]string{"HTTP 500", "may have made the task", "could make a second"}},
		{"send to a task", []string{"send", "--http", srv.URL, "--task", "t-1", "hi"}, 1,
			[]string{"HTTP 500", "may have", "snapnode task get --to " + testAddress + " --key " + key + " --http " + srv.URL + " t-1"}},
		{"send with a key", []string{"send", "--http", srv.URL, "--idempotency-key", "k-1", "hi"}, 1,
			[]string{"HTTP 500", "may have made the task", "--idempotency-key k-1"}},
		{"send --fallback", []string{"send", "--fallback", "--private-endpoints", "--relay", relayURL, "hi"}, 1,
			[]string{"HTTP 500", "may have made the task", "--idempotency-key "}},
		{"stream", []string{"stream", "--http", srv.URL, "hi"}, 1,
			[]string{"HTTP 500", "may have made the task"}},
		{"send over WebSocket", []string{"send", "--http", wsURL, "--idempotency-key", "k-2", "hi"}, 1,
			[]string{"abnormal closure", "may have made the task", "--idempotency-key k-2"}},
		{"send over HTTP, cut before the status line", []string{"send", "--http", cutSrv.URL, "hi"}, 1,
			[]string{"EOF", "may have made the task", "could make a second"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			posts.Store(0)
			args := append([]string{tc.args[0], "--key", key, "--to", testAddress, "--timeout", "10s"}, tc.args[1:]...)
			r := runCLI(t, "", args...)
			if r.code == exitOK {
				t.Fatalf("exit %d:\n%s", r.code, r)
			}
			if n := posts.Load(); n != tc.posts {
				t.Errorf("%d POSTs, want %d", n, tc.posts)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
		})
	}
	r := runCLI(t, "", "task", "get", "--key", key, "--to", testAddress, "--timeout", "10s", "--http", srv.URL, "t-1")
	if r.code == exitOK || !strings.Contains(r.stderr, "HTTP 500") || strings.Contains(r.stderr, "may have") {
		t.Errorf("task get answered HTTP 500: exit %d; want the error alone:\n%s", r.code, r)
	}
}
