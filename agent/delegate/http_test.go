package delegate_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
	"github.com/snapnode/snapnode/tasks"
)

// serveHTTP serves the delegate's SNAP server over HTTP on 127.0.0.1,
// through wrap, until ctx ends; it returns the base URL.
func serveHTTP(t testing.TB, ctx context.Context, key *identity.Key, h snap.Handler, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s, err := snaphttp.New(snaphttp.Config{Handler: h, Key: key, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: wrap(s)}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	t.Cleanup(func() { stop(); srv.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// posts counts the POSTs of an HTTP endpoint; when lose is set, the first
// one is handled and its answer lost: the connection is closed instead.
// While status is set, each is handled and answered with that status
// instead, as a proxy whose wait for the answer ran out.
type posts struct {
	n      atomic.Int64
	lose   bool
	status atomic.Int64
}

func (p *posts) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if st := p.status.Load(); st != 0 {
			p.n.Add(1)
			next.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "no answer in time", int(st))
			return
		}
		if p.n.Add(1) == 1 && p.lose {
			next.ServeHTTP(httptest.NewRecorder(), r)
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// idempotent is a delegate's reply that makes one task per idempotency
// key, as a SNAP agent that honours them does, and counts the tasks made
// and the message/send requests.
type idempotent struct {
	mu    sync.Mutex
	tasks map[string]string // key → task
	sends int
	keys  []string
	msgs  []string // the messages' ids
}

func (d *idempotent) reply(c call) *tasks.Task {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.method == "message/send" {
		d.sends++
		d.keys = append(d.keys, c.key)
		d.msgs = append(d.msgs, c.messageID)
	}
	id := c.taskID
	if id == "" {
		if d.tasks == nil {
			d.tasks = map[string]string{}
		}
		if id = d.tasks[c.key]; id == "" || c.key == "" {
			id = "remote-" + snap.NewID()
			d.tasks[c.key] = id
		}
	}
	return answerTask(id, completed)
}

// withHTTP gives the Delegate its HTTP client, private addresses allowed
// or not.
func withHTTP(private bool) func(*delegate.Config) {
	return func(c *delegate.Config) {
		c.HTTP = delegate.NewHTTP(c.Key, c.Address, private, c.Logger)
	}
}

// A delegate whose card declares an HTTP endpoint is asked there first;
// an answer lost on the way (the connection closed once the delegate made
// the task) is asked for again at the same endpoint with the same
// idempotency key, and the delegate makes one task. Nostr is not used.
func TestDelegateRetryAfterLostAnswerMakesOneTask(t *testing.T) {
	var peer idempotent
	p := &posts{lose: true}
	d, _, _ := setupHTTP(t, peer.reply, p.wrap, withHTTP(true))
	c, err := d.Complete(t.Context(), prompt("job-1", 0))
	if err != nil || c.Text != completed {
		t.Fatalf("%+v, %v", c, err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if peer.sends != 2 || len(peer.tasks) != 1 || peer.keys[0] == "" || peer.keys[0] != peer.keys[1] {
		t.Errorf("%d message/send with keys %q made %d tasks; want 2 with one key, one task", peer.sends, peer.keys, len(peer.tasks))
	}
	if n := p.n.Load(); n != 2 {
		t.Errorf("%d POSTs; want 2: every request went over HTTP", n)
	}
}

// Each step carries a key of its own: a step is not the one before sent
// again.
func TestDelegateKeyPerStep(t *testing.T) {
	var peer idempotent
	p := &posts{}
	d, _, _ := setupHTTP(t, peer.reply, p.wrap, withHTTP(true))
	for step := range 2 {
		if _, err := d.Complete(t.Context(), prompt("job-1", step)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if len(peer.keys) != 2 || peer.keys[0] == "" || peer.keys[1] == "" || peer.keys[0] == peer.keys[1] {
		t.Errorf("keys %q; want one of its own a step", peer.keys)
	}
	if n := p.n.Load(); n != 2 {
		t.Errorf("%d POSTs; want 2", n)
	}
}

// With private addresses refused, the delegate's endpoint on loopback is
// never connected to: the step goes over Nostr, and the refusal is logged
// once, at warn, naming the delegate, however many steps refuse it.
func TestDelegatePrivateEndpointRefused(t *testing.T) {
	var peer idempotent
	p := &posts{}
	var logs testutil.LockedBuffer
	d, _, _ := setupHTTP(t, peer.reply, p.wrap, func(c *delegate.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		withHTTP(false)(c)
	})
	for step := range 2 {
		if _, err := d.Complete(t.Context(), prompt("job-1", step)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if n := p.n.Load(); n != 0 {
		t.Errorf("%d POSTs; want none", n)
	}
	peer.mu.Lock()
	sends := peer.sends
	peer.mu.Unlock()
	if sends != 2 {
		t.Errorf("%d message/send reached the delegate; want 2, over Nostr", sends)
	}
	var n int
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "delegate_private_endpoints") && strings.Contains(l, "127.0.0.1:") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d warnings of the refusal; want 1:\n%s", n, logs.String())
	}
}

// A delegate over HTTP that answers garbage, a task but no worker answer
// in it, is stopped as before; its refused answer is an
// agent.AnsweredError carrying the bytes it sent, which the runtime
// counts against the job's budget as it counts a model server's refused
// answer. Before, the refusal carried no usage and cost the job nothing.
// An error response is the delegate's refusal, not an answer, and
// carries none, as a model server's error status does not.
func TestDelegateGarbageIsAnswered(t *testing.T) {
	const garbage = `{"hello":"world","padding":"` + "0123456789abcdef0123456789abcdef" + `"}`
	p := &posts{}
	d, _, _ := setupHTTP(t, func(c call) *tasks.Task { return answerTask("remote-1", garbage) }, p.wrap, withHTTP(true))
	_, err := d.Complete(t.Context(), prompt("job-1", 0))
	var ae *agent.AnsweredError
	if !errors.As(err, &ae) || !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "the delegate answered garbage") {
		t.Fatalf("err = %v (%T); want an agent.AnsweredError wrapping agent.ErrWorkerFailed", err, err)
	}
	if ae.AnswerBytes < len(garbage) {
		t.Errorf("the refused answer counted %d bytes; want at least the answer's %d", ae.AnswerBytes, len(garbage))
	}
	if p.n.Load() == 0 {
		t.Errorf("no POST: the step did not go over HTTP")
	}

	d, _, _ = setupHTTP(t, func(call) *tasks.Task { return nil }, p.wrap, withHTTP(true))
	_, err = d.Complete(t.Context(), prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || errors.As(err, &ae) {
		t.Fatalf("err = %v (%T); want agent.ErrWorkerFailed, no answer counted", err, err)
	}
}
