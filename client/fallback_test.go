package client_test

import (
	"context"
	"errors"
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
)

// fallbackCard is serverKey's card with endpoints eps.
func fallbackCard(eps []snap.Endpoint, relays ...string) *snap.Card {
	return &snap.Card{Name: "agent", Description: "an agent", Version: "1.0.0", Identity: addr(serverKey),
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"test"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Endpoints: eps, NostrRelays: relays}
}

// Requests of the resend tests: a message/send without an
// idempotencyKey, the same with one, and a tasks/get.
const (
	plainSend = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`
	keyedSend = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`
	getTask   = `{"taskId":"t"}`
)

// exchange is one request of a resend test.
type exchange struct {
	method, payload string
	once            bool // sent once, the error wrapping ErrNotSentAgain
}

// try makes x (a Stream for message/stream, else a Send) to card, whose
// one endpoint logs attempt in log for each request it reads, through h
// and then a Nostr transport that fails. It checks that the endpoint saw
// x once when x.once, else on each of quickFallback's three tries before
// Nostr, and returns the error; end names the endpoint's behaviour in
// what it reports.
func (x exchange) try(t *testing.T, end string, card *snap.Card, h *client.HTTP, log *attempts, attempt string) error {
	t.Helper()
	log.list = nil
	agent, err := client.ToCard(card, h, nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	if x.method == "message/stream" {
		_, err = agent.Stream(t.Context(), x.method, []byte(x.payload), nil)
	} else {
		_, err = agent.Send(t.Context(), x.method, []byte(x.payload))
	}
	want := []string{attempt, attempt, attempt, "nostr"}
	if x.once {
		want = []string{attempt}
	}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("%s, %s %s: attempts %q, want %q (%v)", end, x.method, x.payload, got, want, err)
	}
	return err
}

// log records the attempts of one exchange, in order.
type attempts struct {
	mu   sync.Mutex
	list []string
}

func (a *attempts) add(s string) {
	a.mu.Lock()
	a.list = append(a.list, s)
	a.mu.Unlock()
}

func (a *attempts) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.list)
}

// endpointServer answers POSTs with status (200: a signed response) and
// WebSocket upgrades with a signed response when ws is set; every attempt
// is logged under name.
func endpointServer(t *testing.T, log *attempts, name string, status int, ws bool) string {
	t.Helper()
	up := websocket.Upgrader{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			log.add(name + " ws")
			if !ws {
				http.Error(w, "no WebSocket here", http.StatusNotFound)
				return
			}
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			req, err := snap.Parse(b)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			c.WriteMessage(websocket.TextMessage, reply{}.build(t, req))
			c.ReadMessage() // until the client closes
			return
		}
		log.add(name + " post")
		b := make([]byte, 1<<16)
		n, _ := r.Body.Read(b)
		if status != http.StatusOK {
			http.Error(w, "down", status)
			return
		}
		req, err := snap.Parse(b[:n])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply{}.build(t, req))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// nostrStub is the Nostr transport of a test: it logs its use and answers
// with a response of its own or fails.
type nostrStub struct {
	log *attempts
	err error
}

func (n nostrStub) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	n.log.add("nostr")
	if n.err != nil {
		return nil, n.err
	}
	return &snap.Message{Type: snap.TypeResponse, Method: method, From: addr(serverKey), Payload: []byte(`{"via":"nostr"}`)}, nil
}

func (n nostrStub) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	return n.Send(ctx, method, payload)
}

var quickFallback = client.FallbackConfig{Retries: 2, Backoff: time.Millisecond}

// A caller tries the card's endpoints in their declared order, each with
// its retries, and each with the protocol the card declares for it (an
// "http" endpoint is posted to, a "wss" one is a WebSocket); the first that
// answers ends the exchange, and Nostr is not used.
func TestFallbackTriesEndpointsInOrder(t *testing.T) {
	log := &attempts{}
	down := endpointServer(t, log, "first", http.StatusServiceUnavailable, false)
	wsOnly := endpointServer(t, log, "second", http.StatusServiceUnavailable, true)
	card := fallbackCard([]snap.Endpoint{
		{Protocol: "http", URL: down + "/snap"},
		{Protocol: "wss", URL: strings.Replace(wsOnly, "http://", "ws://", 1) + "/snap"},
	}, "wss://relay.example")
	h := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	agent, err := client.ToCard(card, h, nostrStub{log: log}, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil || resp.Type != snap.TypeResponse || resp.From != addr(serverKey) {
		t.Fatalf("Send: %v %v", resp, err)
	}
	want := []string{"first post", "first post", "first post", "second ws"}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}
}

// A card that declares only an http endpoint is never reached over
// WebSocket, whatever its URL's scheme, and a wss one never posted to.
func TestFallbackUsesOnlyDeclaredProtocols(t *testing.T) {
	log := &attempts{}
	srv := endpointServer(t, log, "agent", http.StatusOK, true)
	for _, tc := range []struct {
		name string
		ep   snap.Endpoint
		want string
	}{
		{"http with a ws URL", snap.Endpoint{Protocol: "http", URL: strings.Replace(srv, "http://", "ws://", 1) + "/snap"}, "agent post"},
		{"wss with an http URL", snap.Endpoint{Protocol: "wss", URL: srv + "/snap"}, "agent ws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.list = nil
			agent, err := client.ToCard(fallbackCard([]snap.Endpoint{tc.ep}), client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, quickFallback)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
				t.Fatal(err)
			}
			if got := log.get(); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("attempts %q, want %q", got, tc.want)
			}
		})
	}
}

// When every endpoint fails, Nostr is tried if the card names relays (or
// the caller says it found the card on Nostr's relays); if it names none,
// or Nostr fails too, the error is 4001 TransportUnavailable
// with data {tried, endpoint}, wrapping each attempt's failure.
func TestFallbackToNostrThen4001(t *testing.T) {
	log := &attempts{}
	down := endpointServer(t, log, "down", http.StatusBadGateway, false)
	eps := []snap.Endpoint{{Protocol: "http", URL: down + "/snap"}}
	h := client.NewHTTP(client.HTTPConfig{Key: clientKey})

	agent, _ := client.ToCard(fallbackCard(eps, "wss://relay.example"), h, nostrStub{log: log}, quickFallback)
	resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil || string(resp.Payload) != `{"via":"nostr"}` {
		t.Fatalf("Send: %v %v", resp, err)
	}
	if got, want := log.get(), []string{"down post", "down post", "down post", "nostr"}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}

	// No relays on the card: Nostr is a protocol it does not declare.
	log.list = nil
	agent, _ = client.ToCard(fallbackCard(eps), h, nostrStub{log: log}, quickFallback)
	_, err = agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeTransportUnavail {
		t.Fatalf("err = %v, want 4001", err)
	}
	if tried, _ := se.Data["tried"].([]string); !slices.Equal(tried, []string{down + "/snap"}) || se.Data["endpoint"] != down+"/snap" {
		t.Errorf("data %v", se.Data)
	}
	var st *client.StatusError
	if !errors.As(err, &st) || st.StatusCode != http.StatusBadGateway {
		t.Errorf("err = %v, want the endpoint's 502 wrapped", err)
	}
	if got := log.get(); slices.Contains(got, "nostr") {
		t.Errorf("Nostr used for a card without relays: %q", got)
	}

	// No relays on the card, but the caller found it on its own
	// relays: Nostr follows.
	log.list = nil
	cfg := quickFallback
	cfg.NostrWithoutRelays = true
	agent, _ = client.ToCard(fallbackCard(eps), h, nostrStub{log: log}, cfg)
	resp, err = agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil || string(resp.Payload) != `{"via":"nostr"}` {
		t.Fatalf("NostrWithoutRelays: %v %v; want Nostr's answer", resp, err)
	}
	if got, want := log.get(), []string{"down post", "down post", "down post", "nostr"}; !slices.Equal(got, want) {
		t.Errorf("NostrWithoutRelays: attempts %q, want %q", got, want)
	}

	// Nostr fails too.
	log.list = nil
	nostrDown := errors.New("no relay answered")
	agent, _ = client.ToCard(fallbackCard(eps, "wss://relay.example"), h, nostrStub{log: log, err: nostrDown}, quickFallback)
	_, err = agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if !errors.As(err, &se) || se.Code != snap.CodeTransportUnavail || !errors.Is(err, nostrDown) {
		t.Fatalf("err = %v, want 4001 wrapping Nostr's failure", err)
	}
	if tried, _ := se.Data["tried"].([]string); !slices.Equal(tried, []string{down + "/snap", "nostr"}) || se.Data["endpoint"] != "nostr" {
		t.Errorf("data %v", se.Data)
	}
}

// A verified answer ends the exchange, a SNAP error included: the agent
// was reached. A caller's deadline ends it too, without trying further.
func TestFallbackStopsAtAnAnswer(t *testing.T) {
	log := &attempts{}
	var posts atomic.Int32
	refusing := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		posts.Add(1)
		m := &snap.Message{ID: snap.NewID(), Version: "0.1", From: addr(serverKey), To: req.From, Type: snap.TypeResponse,
			Method: req.Method, Payload: []byte(`{"error":{"code":5003,"message":"busy","data":{"retryAfter":1}}}`), Timestamp: time.Now().Unix()}
		if err := m.Sign(serverKey); err != nil {
			t.Error(err)
		}
		w.Write(raw(t, m))
	})
	second := endpointServer(t, log, "second", http.StatusOK, false)
	card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: refusing}, {Protocol: "http", URL: second}}, "wss://relay.example")
	agent, _ := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, quickFallback)
	resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil || snap.ResponseError(resp.Payload) == nil || posts.Load() != 1 || len(log.get()) != 0 {
		t.Errorf("Send: %v %v; %d posts, then %q", resp, err, posts.Load(), log.get())
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	down := endpointServer(t, log, "down", http.StatusServiceUnavailable, false)
	agent, _ = client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: down}}, "wss://relay.example"),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, quickFallback)
	if _, err := agent.Send(ctx, "tasks/get", []byte(`{"taskId":"t"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the caller's cancellation", err)
	}
	if got := log.get(); slices.Contains(got, "nostr") {
		t.Errorf("tried on after the caller gave up: %q", got)
	}
}

// A card that is not valid is refused.
func TestFallbackRefusesAnInvalidCard(t *testing.T) {
	card := fallbackCard(nil)
	card.Name = ""
	if _, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, client.FallbackConfig{}); !errors.Is(err, snap.CodeAgentCardInvalid) {
		t.Errorf("err = %v, want 3002", err)
	}
}

// An endpoint that asks to be tried again after longer than MaxWait (a
// Retry-After of an hour) is left for the next one at once, not waited
// for until the caller's deadline.
func TestFallbackLeavesALongRetryAfter(t *testing.T) {
	log := &attempts{}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add("slow post")
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "come back in an hour", http.StatusServiceUnavailable)
	}))
	t.Cleanup(slow.Close)
	up := endpointServer(t, log, "second", http.StatusOK, false)
	card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: slow.URL + "/snap"}, {Protocol: "http", URL: up + "/snap"}})
	agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := agent.Send(ctx, "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
		t.Fatalf("Send: %v (attempts %q)", err, log.get())
	}
	if got, want := log.get(), []string{"slow post", "second post"}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}
}

// A Retry-After given as an HTTP-date an hour ahead is a long wait too:
// the endpoint is left for the next at once.
func TestFallbackLeavesALongRetryAfterDate(t *testing.T) {
	log := &attempts{}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add("slow post")
		w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		http.Error(w, "come back in an hour", http.StatusTooManyRequests)
	}))
	t.Cleanup(slow.Close)
	up := endpointServer(t, log, "second", http.StatusOK, false)
	card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: slow.URL + "/snap"}, {Protocol: "http", URL: up + "/snap"}})
	agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
		t.Fatalf("Send: %v (attempts %q)", err, log.get())
	}
	if got, want := log.get(), []string{"slow post", "second post"}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}
}

// A 5002 whose data says when to come back (retryAfter, seconds) is
// waited for and the request sent again, within the endpoint's retries
// and MaxWait; one that asks for longer, or says nothing, is the answer.
func TestFallbackWaitsForRateLimit(t *testing.T) {
	limited := func(retryAfter string, refusals int32) (string, *atomic.Int32) {
		var posts atomic.Int32
		url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
			payload := `{"task":{"id":"t"}}`
			if posts.Add(1) <= refusals {
				payload = `{"error":{"code":5002,"message":"rate limit exceeded","data":{"limit":1,"window":"1s"` + retryAfter + `}}}`
			}
			m := &snap.Message{ID: snap.NewID(), Version: "0.1", From: addr(serverKey), To: req.From, Type: snap.TypeResponse,
				Method: req.Method, Payload: []byte(payload), Timestamp: time.Now().Unix()}
			if err := m.Sign(serverKey); err != nil {
				t.Error(err)
			}
			w.Write(raw(t, m))
		})
		return url, &posts
	}
	h := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	send := func(url string) *snap.Message {
		t.Helper()
		agent, err := client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: url}}), h, nil, quickFallback)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	url, posts := limited(`,"retryAfter":1`, 1)
	if resp := send(url); resp.ErrorCode() != 0 || posts.Load() != 2 {
		t.Errorf("after one 5002 with retryAfter 1: %s after %d posts, want the task after 2", resp.Payload, posts.Load())
	}
	url, posts = limited(`,"retryAfter":1`, 10)
	if resp := send(url); resp.ErrorCode() != snap.CodeRateLimitExceeded || posts.Load() != 3 {
		t.Errorf("limited throughout: %s after %d posts, want the 5002 after 3 (2 retries)", resp.Payload, posts.Load())
	}
	url, posts = limited(`,"retryAfter":3600`, 1)
	if resp := send(url); resp.ErrorCode() != snap.CodeRateLimitExceeded || posts.Load() != 1 {
		t.Errorf("retryAfter of an hour: %s after %d posts, want the 5002 at once", resp.Payload, posts.Load())
	}
	url, posts = limited(``, 1)
	if resp := send(url); resp.ErrorCode() != snap.CodeRateLimitExceeded || posts.Load() != 1 {
		t.Errorf("no retryAfter: %s after %d posts, want the 5002 at once", resp.Payload, posts.Load())
	}
}

// An agent of the reference SDK answers HTTP 500 {"error":"Internal
// server error"} to every failure of a request it took, its handler's
// included (after the task was made), and 204 when its handler returned
// nothing; it keeps no idempotency keys. A message/send, message/stream
// or service/call answered so is not sent again, to that endpoint or
// another transport: each attempt could make another task. A request
// safe to repeat (tasks/get, tasks/cancel, tasks/resubscribe) is retried
// as any 5xx is.
func TestFallbackDoesNotRepeatWhatAPeerTook(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusNoContent} {
		log := &attempts{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			log.add("sdk post")
			if status == http.StatusNoContent {
				w.WriteHeader(status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"error":"Internal server error"}`))
		}))
		t.Cleanup(ts.Close)
		card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
		h := client.NewHTTP(client.HTTPConfig{Key: clientKey})
		for _, tc := range []struct {
			method, payload string
			want            []string
		}{
			{"message/send", `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`, []string{"sdk post"}},
			{"message/send", `{"message":{"messageId":"m2","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`, []string{"sdk post"}},
			{"service/call", `{"name":"q"}`, []string{"sdk post"}},
			{"tasks/get", `{"taskId":"t"}`, []string{"sdk post", "sdk post", "sdk post", "nostr"}},
		} {
			log.list = nil
			agent, err := client.ToCard(card, h, nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
			if err != nil {
				t.Fatal(err)
			}
			_, err = agent.Send(t.Context(), tc.method, []byte(tc.payload))
			if err == nil {
				t.Errorf("HTTP %d, %s: no error", status, tc.method)
			}
			if got := log.get(); !slices.Equal(got, tc.want) {
				t.Errorf("HTTP %d, %s: attempts %q, want %q (%v)", status, tc.method, got, tc.want, err)
			}
			if once := len(tc.want) == 1; errors.Is(err, client.ErrNotSentAgain) != once {
				t.Errorf("HTTP %d, %s: %v; want client.ErrNotSentAgain wrapped: %v", status, tc.method, err, once)
			}
		}
		if status == http.StatusInternalServerError {
			// A stream too: the SDK answers 500 before any event.
			log.list = nil
			agent, _ := client.ToCard(card, h, nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
			if _, err := agent.Stream(t.Context(), "message/stream", []byte(`{"message":{"messageId":"m3","role":"user","parts":[{"text":"x"}]}}`), nil); err == nil {
				t.Error("message/stream: no error")
			}
			if got := log.get(); !slices.Equal(got, []string{"sdk post"}) {
				t.Errorf("HTTP 500, message/stream: attempts %q, want one", got)
			}
		}
	}
}

// What says the endpoint did not take a message/send is still tried
// again and then on the card's next transport: an HTTP 429 or 503 (a
// busy SNAP node refuses so, with Retry-After: one longer than MaxWait
// leaves the endpoint for the next at once), a proxy's 502 or 504. So is
// a connection closed once the message was written, before the status
// line, because the message carries an idempotency key: without one it
// is not sent again (TestFallbackDoesNotRepeatWhatAnHTTPPeerMayHaveTaken).
// A 500 or 204, the answers of an agent of the reference SDK that took
// the request, end the exchange.
func TestFallbackRetriesWhatAPeerDidNotTake(t *testing.T) {
	send := []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`)
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		want       []string
	}{
		{"429", http.StatusTooManyRequests, "", []string{"post", "post", "post", "nostr"}},
		{"503", http.StatusServiceUnavailable, "", []string{"post", "post", "post", "nostr"}},
		{"503 with a long Retry-After", http.StatusServiceUnavailable, "5", []string{"post", "nostr"}},
		{"502", http.StatusBadGateway, "", []string{"post", "post", "post", "nostr"}},
		{"504", http.StatusGatewayTimeout, "", []string{"post", "post", "post", "nostr"}},
		{"connection closed once the message was written", 0, "", []string{"post", "post", "post", "nostr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &attempts{}
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.add("post")
				if tc.status == 0 {
					if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
						c.Close()
					}
					return
				}
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				http.Error(w, "busy", tc.status)
			}))
			t.Cleanup(ts.Close)
			card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
			cfg := quickFallback
			cfg.MaxWait = time.Second
			agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := agent.Send(t.Context(), "message/send", send); err != nil {
				t.Errorf("Send: %v; want Nostr's answer", err)
			}
			if got := log.get(); !slices.Equal(got, tc.want) {
				t.Errorf("attempts %q, want %q", got, tc.want)
			}
		})
	}
}

// An agent of the reference SDK answers a stream's request with its
// event-stream headers before its handler runs; when the handler fails,
// the stream ends without an event or, as the SDK does, never ends. The
// request was taken: a message/stream answered so is not sent again (each
// attempt could make a task), a tasks/resubscribe is.
func TestFallbackDoesNotRepeatAStreamThePeerBegan(t *testing.T) {
	for _, hang := range []bool{false, true} {
		log := &attempts{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			log.add("sdk post")
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			if hang {
				<-r.Context().Done()
			}
		}))
		t.Cleanup(ts.Close)
		card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
		h := client.NewHTTP(client.HTTPConfig{Key: clientKey, IdleTimeout: 50 * time.Millisecond})
		for _, tc := range []struct {
			method, payload string
			want            []string
		}{
			{"message/stream", `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`, []string{"sdk post"}},
			{"tasks/resubscribe", `{"taskId":"t"}`, []string{"sdk post", "sdk post", "sdk post", "nostr"}},
		} {
			log.list = nil
			agent, err := client.ToCard(card, h, nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
			if err != nil {
				t.Fatal(err)
			}
			_, err = agent.Stream(t.Context(), tc.method, []byte(tc.payload), nil)
			if err == nil {
				t.Errorf("hang %v, %s: no error", hang, tc.method)
			}
			if got := log.get(); !slices.Equal(got, tc.want) {
				t.Errorf("hang %v, %s: attempts %q, want %q (%v)", hang, tc.method, got, tc.want, err)
			}
			if once := len(tc.want) == 1; errors.Is(err, client.ErrNotSentAgain) != once {
				t.Errorf("hang %v, %s: %v; want client.ErrNotSentAgain wrapped: %v", hang, tc.method, err, once)
			}
		}
	}
}

// A WebSocket endpoint whose upgrade is answered HTTP 500 never read the
// request, which goes after the upgrade: a message/send is tried again
// and then over the card's next transport, as for any 5xx.
func TestFallbackRetriesAFailedUpgrade(t *testing.T) {
	log := &attempts{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add("upgrade")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":"Internal server error"}`))
	}))
	t.Cleanup(ts.Close)
	card := fallbackCard([]snap.Endpoint{{Protocol: "wss", URL: strings.Replace(ts.URL, "http://", "ws://", 1) + "/"}}, "wss://relay.example")
	agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, quickFallback)
	if err != nil {
		t.Fatal(err)
	}
	send := []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`)
	if _, err := agent.Send(t.Context(), "message/send", send); err != nil {
		t.Errorf("Send: %v; want Nostr's answer", err)
	}
	if got, want := log.get(), []string{"upgrade", "upgrade", "upgrade", "nostr"}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q", got, want)
	}
}

// A WebSocket endpoint that read the request and then went quiet (an
// agent of the reference SDK sends nothing when its handler fails, and
// keeps no idempotency keys) took it: a message/send or message/stream is
// not sent again, with an idempotency key or without, and the error says
// the agent may have acted on it and how to check. Nor is one without a
// key whose connection was closed or cut before an answer came; with a
// key, that is the answer lost on the way, and the request is sent again
// for an agent that keeps keys to give the task the first made. A
// tasks/get is tried again whatever the end, and so is a request the
// endpoint closed with 1009 (message too big): it refused to read it.
func TestFallbackDoesNotRepeatWhatAWebSocketTook(t *testing.T) {
	for _, tc := range []struct {
		end       string
		exchanges []exchange
	}{
		{"quiet", []exchange{{"message/send", plainSend, true}, {"message/send", keyedSend, true}, {"message/stream", keyedSend, true}, {"tasks/get", getTask, false}}},
		{"close", []exchange{{"message/send", plainSend, true}, {"message/stream", plainSend, true}, {"message/send", keyedSend, false}, {"tasks/get", getTask, false}}},
		{"cut", []exchange{{"message/send", plainSend, true}, {"message/stream", plainSend, true}, {"message/stream", keyedSend, false}, {"tasks/get", getTask, false}}},
		{"too big", []exchange{{"message/send", plainSend, false}, {"message/stream", plainSend, false}}},
	} {
		log := &attempts{}
		up := websocket.Upgrader{}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close() // "cut": no close frame
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
			log.add("ws request")
			code := 0
			switch tc.end {
			case "quiet":
				c.ReadMessage() // until the client gives up
			case "close":
				code = websocket.CloseInternalServerErr
			case "too big":
				code = websocket.CloseMessageTooBig
			}
			if code != 0 {
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
				c.ReadMessage()
			}
		}))
		t.Cleanup(ts.Close)
		card := fallbackCard([]snap.Endpoint{{Protocol: "wss", URL: strings.Replace(ts.URL, "http://", "ws://", 1) + "/"}}, "wss://relay.example")
		h := client.NewHTTP(client.HTTPConfig{Key: clientKey, IdleTimeout: 50 * time.Millisecond})
		for _, x := range tc.exchanges {
			err := x.try(t, tc.end, card, h, log, "ws request")
			if errors.Is(err, client.ErrNotSentAgain) != x.once || x.once && !client.Taken(err) {
				t.Errorf("%s, %s %s: %v; want client.ErrNotSentAgain wrapped, client.Taken: %v", tc.end, x.method, x.payload, err, x.once)
			}
			if x.once {
				for _, says := range []string{"may have acted", "tasks/get", "idempotencyKey"} {
					if err == nil || !strings.Contains(err.Error(), says) {
						t.Errorf("%s, %s %s: %v; want it to say %q", tc.end, x.method, x.payload, err, says)
					}
				}
			}
		}
	}
}
