package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// An HTTP endpoint that read a POST in full and then closed the
// connection before its status line, or said nothing until the client
// gave up, may have acted on it, as a WebSocket that did so may: the
// resend rule is one for both. A message/send or message/stream whose
// endpoint went quiet is not sent again, with an idempotencyKey or
// without; one whose connection was cut is sent again only with a key
// (the answer may have been lost, and an agent that keeps keys answers
// with the task the first made). A tasks/get is tried again whatever the
// end. Each attempt is signed anew, so the agent's replay check would not
// stop a second one.
func TestFallbackDoesNotRepeatWhatAnHTTPPeerMayHaveTaken(t *testing.T) {
	for _, tc := range []struct {
		end       string
		exchanges []exchange
	}{
		{"cut", []exchange{{"message/send", plainSend, true}, {"message/stream", plainSend, true}, {"message/send", keyedSend, false}, {"message/stream", keyedSend, false}, {"tasks/get", getTask, false}}},
		{"quiet", []exchange{{"message/send", plainSend, true}, {"message/send", keyedSend, true}, {"message/stream", keyedSend, true}, {"tasks/get", getTask, false}}},
	} {
		log := &attempts{}
		done := make(chan struct{})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				return
			}
			log.add("post")
			if tc.end == "quiet" {
				select {
				case <-r.Context().Done(): // the client gave up
				case <-done:
				}
				return
			}
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
		}))
		t.Cleanup(ts.Close)
		t.Cleanup(func() { close(done) })
		card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
		h := client.NewHTTP(client.HTTPConfig{Key: clientKey, IdleTimeout: 50 * time.Millisecond,
			Net: client.NetConfig{ResponseHeaderTimeout: 50 * time.Millisecond}})
		for _, x := range tc.exchanges {
			err := x.try(t, tc.end, card, h, log, "post")
			if errors.Is(err, client.ErrNotSentAgain) != x.once || !client.Taken(err) {
				t.Errorf("%s, %s %s: %v; want client.ErrNotSentAgain wrapped: %v, client.Taken", tc.end, x.method, x.payload, err, x.once)
			}
		}
	}
}

// What never reached an HTTP endpoint whole is sent again, and then on the
// card's next transport, with an idempotencyKey or without: a connection
// refused, a TLS handshake that failed.
func TestFallbackRetriesWhatNeverReachedAnHTTPPeer(t *testing.T) {
	const send = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	var handled atomic.Bool
	tlsServer := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { handled.Store(true) }))
	t.Cleanup(tlsServer.Close)
	for name, url := range map[string]string{"refused": refused, "TLS": tlsServer.URL + "/"} {
		log := &attempts{}
		card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: url}}, "wss://relay.example")
		agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, quickFallback)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.Send(t.Context(), "message/send", []byte(send)); err != nil {
			t.Errorf("%s: %v; want Nostr's answer", name, err)
		}
		if got := log.get(); !slices.Equal(got, []string{"nostr"}) {
			t.Errorf("%s: attempts %q, want Nostr's", name, got)
		}
	}
	if handled.Load() {
		t.Error("the TLS server handled a request")
	}
}

// A snapnode node that shuts down answers every request it read before it
// closes a WebSocket with 1001 (going away), a request it read ahead with
// the signed 5003: a 1001 that comes, once the request was written, with
// no answer says the node never read it. A message/send without an
// idempotencyKey is then sent again, and then on the card's next
// transport, as one refused with 1009 or 1003 is.
func TestFallbackRetriesWhatANodeShuttingDownDidNotRead(t *testing.T) {
	handled := make(chan struct{}, 1)
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		handled <- struct{}{}
		return map[string]any{"task": map[string]any{"id": "t-1", "status": map[string]any{"state": "submitted"}}}, nil
	})
	self := addr(serverKey)
	server := snap.NewServer(snap.ServerConfig{Key: serverKey, Router: router, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String() + "/snap"
	card := fallbackCard([]snap.Endpoint{{Protocol: "wss", URL: url}}, "wss://relay.example")
	srv, err := snaphttp.New(snaphttp.Config{Handler: server, Key: serverKey, Card: func() *snap.Card { return card },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { shutdown(); <-served })

	// The dialer's connection holds the request back until the node has
	// shut down, and reports it written: the node, closing with 1001,
	// never read it, as when it came once the node stopped reading.
	log := &attempts{}
	var d net.Dialer
	dialer := &websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		log.add("ws")
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &heldConn{Conn: c, hold: func() { shutdown(); <-served; served <- nil }}, nil
	}}
	h := client.NewHTTP(client.HTTPConfig{Key: clientKey, Dialer: dialer})
	agent, err := client.ToCard(card, h, nostrStub{log: log}, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.Send(t.Context(), "message/send", []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`))
	if err != nil {
		t.Errorf("Send: %v; want Nostr's answer", err)
	}
	if got, want := log.get(), []string{"ws", "ws", "ws", "nostr"}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}
	select {
	case <-handled:
		t.Error("the node handled the request")
	default:
	}
}

// heldConn is a client's connection whose first write after the answer to
// its upgrade (the request's frame) calls hold and is then dropped,
// reported written.
type heldConn struct {
	net.Conn
	hold     func()
	mu       sync.Mutex
	answered bool // the upgrade's answer was read
	held     bool
}

func (c *heldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.answered = c.answered || n > 0 && strings.HasPrefix(string(p[:n]), "HTTP/1.1 101")
	c.mu.Unlock()
	return n, err
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	hold := c.answered && !c.held
	c.held = c.held || hold
	c.mu.Unlock()
	if hold {
		c.hold()
		return len(p), nil
	}
	if c.held {
		return len(p), nil
	}
	return c.Conn.Write(p)
}
