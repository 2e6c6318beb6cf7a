package client_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/snap"
)

// flaky is an endpoint whose state the test sets: "up" answers, "503"
// and "404" refuse with that status, "drop" closes the connection without
// an answer (a transport error), "hold" answers its first request once
// release is closed, after telling held, and the next ones at once.
// Every attempt is logged under name.
type flaky struct {
	mu      sync.Mutex
	state   string
	held    chan struct{}
	release chan struct{}
}

func (f *flaky) set(state string) {
	f.mu.Lock()
	f.state = state
	f.mu.Unlock()
}

func (f *flaky) serve(t *testing.T, log *attempts, name string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(name)
		f.mu.Lock()
		state := f.state
		if state == "hold" {
			f.state = "up" // the next request is answered at once
		}
		f.mu.Unlock()
		switch state {
		case "503":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case "404":
			http.Error(w, "not here", http.StatusNotFound)
			return
		case "drop":
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		case "hold":
			f.held <- struct{}{}
			<-f.release
		}
		b := make([]byte, 1<<16)
		n, _ := r.Body.Read(b)
		req, err := snap.Parse(b[:n])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply{}.build(t, req))
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/snap"
}

// syncBuffer is a log's output, safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// An endpoint that failed an exchange after its retries (a transport
// error or a 5xx) is set aside: the next exchanges of the same Transport
// go to the card's next one at once. Once the while has passed it is
// tried once, without retries: a failure sets it aside for twice as long,
// up to MaxSetAside; an answer brings it back, logged once, as its
// setting aside was.
func TestFallbackSetsAsideAFailedEndpoint(t *testing.T) {
	for _, failure := range []string{"503", "drop"} {
		t.Run(failure, func(t *testing.T) {
			log := &attempts{}
			first := &flaky{state: failure}
			firstURL := first.serve(t, log, "first")
			second := (&flaky{state: "up"}).serve(t, log, "second")
			card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: firstURL}, {Protocol: "http", URL: second}}, "wss://relay.example")
			clock := testclock.New(time.Now())
			out := &syncBuffer{}
			cfg := quickFallback
			cfg.SetAside, cfg.MaxSetAside = 30*time.Second, 2*time.Minute
			cfg.Now, cfg.Logger = clock.Now, slog.New(slog.NewTextHandler(out, nil))
			agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			step := func(what string, want ...string) {
				t.Helper()
				log.list = nil
				resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
				if err != nil || resp.Type != snap.TypeResponse {
					t.Fatalf("%s: Send: %v %v", what, resp, err)
				}
				if got := log.get(); !slices.Equal(got, want) {
					t.Errorf("%s: attempts %q, want %q", what, got, want)
				}
			}
			const asideLog, backLog = "is set aside", "answers again"

			step("first exchange", "first", "first", "first", "second")
			if n := out.count(asideLog); n != 1 {
				t.Errorf("logged the setting aside %d times, want once:\n%s", n, out.b.String())
			}
			step("set aside", "second")
			clock.Advance(29 * time.Second)
			step("29 s later", "second")
			clock.Advance(time.Second)
			step("30 s later: one try", "first", "second")
			clock.Advance(59 * time.Second)
			step("the failed try doubled the while", "second")
			clock.Advance(time.Second)
			step("60 s after the try", "first", "second")
			clock.Advance(2 * time.Minute)
			step("120 s after", "first", "second")
			clock.Advance(2 * time.Minute)
			step("at most MaxSetAside", "first", "second")
			if n := out.count(asideLog); n != 1 {
				t.Errorf("logged the setting aside %d times, want once:\n%s", n, out.b.String())
			}

			first.set("up")
			step("up but still aside", "second")
			clock.Advance(2 * time.Minute)
			step("back", "first")
			step("back for good", "first")
			if n := out.count(backLog); n != 1 {
				t.Errorf("logged the return %d times, want once:\n%s", n, out.b.String())
			}

			// An answer cleared the record: failing again, the endpoint has
			// its retries, and is set aside for SetAside, not longer.
			first.set(failure)
			step("down again", "first", "first", "first", "second")
			clock.Advance(30 * time.Second)
			step("30 s later", "first", "second")
			if n := out.count(asideLog); n != 2 {
				t.Errorf("logged the setting aside %d times, want twice:\n%s", n, out.b.String())
			}
		})
	}
}

// Only a transport error or a 5xx sets an endpoint aside: a refusal of the
// request (a 404), a SNAP error answer or a 5002 with retryAfter leaves
// it in use.
func TestFallbackSetsAsideOnlyFailures(t *testing.T) {
	log := &attempts{}
	first := &flaky{state: "404"}
	firstURL := first.serve(t, log, "first")
	second := (&flaky{state: "up"}).serve(t, log, "second")
	clock := testclock.New(time.Now())
	cfg := quickFallback
	cfg.Now = clock.Now
	agent, err := client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: firstURL}, {Protocol: "http", URL: second}}),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		log.list = nil
		if _, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
			t.Fatal(err)
		}
		if got, want := log.get(), []string{"first", "second"}; !slices.Equal(got, want) {
			t.Errorf("attempts %q, want %q", got, want)
		}
	}

	var posts atomic.Int32
	limited := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		posts.Add(1)
		m := &snap.Message{ID: snap.NewID(), Version: "0.1", From: addr(serverKey), To: req.From, Type: snap.TypeResponse, Method: req.Method,
			Payload: []byte(`{"error":{"code":5002,"message":"rate limit exceeded","data":{"limit":1,"window":"1s","retryAfter":0.001}}}`), Timestamp: time.Now().Unix()}
		if err := m.Sign(serverKey); err != nil {
			t.Error(err)
		}
		w.Write(raw(t, m))
	})
	agent, _ = client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: limited}, {Protocol: "http", URL: second}}),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, cfg)
	for i := range 2 {
		resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
		if err != nil || resp.ErrorCode() != snap.CodeRateLimitExceeded {
			t.Fatalf("Send: %v %v", resp, err)
		}
		if n := posts.Load(); n != int32(3*(i+1)) {
			t.Errorf("after exchange %d: %d posts, want %d", i+1, n, 3*(i+1))
		}
	}
}

// While one exchange tries an endpoint whose while has passed, the others
// keep to the next transport: one try at a time.
func TestFallbackTriesASetAsideEndpointOnce(t *testing.T) {
	log := &attempts{}
	first := &flaky{state: "503", held: make(chan struct{}), release: make(chan struct{})}
	firstURL := first.serve(t, log, "first")
	second := (&flaky{state: "up"}).serve(t, log, "second")
	clock := testclock.New(time.Now())
	cfg := quickFallback
	cfg.Now = clock.Now
	agent, err := client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: firstURL}, {Protocol: "http", URL: second}}),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	send := func() error {
		_, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	first.set("hold")
	clock.Advance(client.DefaultSetAside)
	done := make(chan error, 1)
	go func() { done <- send() }()
	<-first.held
	log.list = nil
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if got, want := log.get(), []string{"second"}; !slices.Equal(got, want) {
		t.Errorf("while the try is under way: attempts %q, want %q", got, want)
	}
	close(first.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log.list = nil
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if got, want := log.get(), []string{"first"}; !slices.Equal(got, want) {
		t.Errorf("after the try answered: attempts %q, want %q", got, want)
	}
}

// When every endpoint is set aside and nothing follows them (no Nostr),
// they are tried, once each, rather than nothing.
func TestFallbackSetAsideButNothingElse(t *testing.T) {
	log := &attempts{}
	first := &flaky{state: "503"}
	firstURL := first.serve(t, log, "first")
	clock := testclock.New(time.Now())
	cfg := quickFallback
	cfg.Now = clock.Now
	agent, err := client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: firstURL}}),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"first", "first", "first"}, {"first"}} {
		log.list = nil
		_, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
		if se, ok := errors.AsType[*snap.Error](err); !ok || se.Code != snap.CodeTransportUnavail {
			t.Fatalf("exchange %d: %v, want 4001", i+1, err)
		}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("exchange %d: attempts %q, want %q", i+1, got, want)
		}
	}
	first.set("up")
	log.list = nil
	if _, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := log.get(), []string{"first"}; !slices.Equal(got, want) {
		t.Errorf("back: attempts %q, want %q", got, want)
	}
}

// An endpoint set aside whose while has passed is tried by the first
// exchange that reaches it: one that an earlier endpoint answered does
// not count as its try.
func TestFallbackSetAsideTriedWhenReached(t *testing.T) {
	log := &attempts{}
	first, second := &flaky{state: "503"}, &flaky{state: "503"}
	firstURL, secondURL := first.serve(t, log, "first"), second.serve(t, log, "second")
	clock := testclock.New(time.Now())
	cfg := quickFallback
	cfg.Now = clock.Now
	agent, err := client.ToCard(fallbackCard([]snap.Endpoint{{Protocol: "http", URL: firstURL}, {Protocol: "http", URL: secondURL}}, "wss://relay.example"),
		client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, want ...string) {
		t.Helper()
		log.list = nil
		if _, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("%s: attempts %q, want %q", what, got, want)
		}
	}
	step("both down", "first", "first", "first", "second", "second", "second", "nostr")
	first.set("up")
	clock.Advance(client.DefaultSetAside)
	step("the first back", "first")
	first.set("503")
	second.set("up")
	step("the first down again, the second up", "first", "first", "first", "second")
}
