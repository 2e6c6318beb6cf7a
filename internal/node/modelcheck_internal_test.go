package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/testutil"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe),
// which a synctest bubble's fake clock can wait on, as it cannot on a
// socket: dial makes one.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "model.test" }

// The start's log line of a model server reached names the context length
// the agent's runtime works with, and where it comes from. The runtime
// waits agent.ContextWait for the server's: a server whose GET /models
// answers later is still reached, but the runtime works with the default
// by then, and the line says so; it named the server's length, which no
// job used.
func TestModelServerReachedNamesTheContextLengthUsed(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  time.Duration // when GET /models answers
		tokens  int
		from    string
		fromNot string
	}{
		{"in time", agent.ContextWait / 2, 8192, `context_tokens_from="the model server"`, ""},
		{"late", agent.ContextWait + time.Second, agent.DefaultContextTokens, "did not give its context length within 10s", "the model server\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/v1/models" {
						http.NotFound(w, r)
						return
					}
					select {
					case <-time.After(time.Until(start.Add(c.answer))):
					case <-r.Context().Done():
						return
					}
					fmt.Fprint(w, `{"object":"list","data":[{"id":"m1","max_model_len":8192}]}`)
				}))
				srv.Listener.Close()
				ln := newPipeListener()
				srv.Listener = ln
				srv.Start()
				defer srv.Close()
				tr := &http.Transport{DialContext: ln.dial}
				defer tr.CloseIdleConnections()
				client, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", HTTPClient: &http.Client{Transport: tr}})
				if err != nil {
					t.Fatal(err)
				}
				rt, err := agent.New(agent.Config{Queue: agent.NewQueue(&agent.Store{}, nil), Store: &agent.Store{},
					Tasks: noTasks{}, Executor: noExecutor{}, Model: client})
				if err != nil {
					t.Fatal(err)
				}
				var logs testutil.LockedBuffer
				logger := slog.New(slog.NewTextHandler(&logs, nil))
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var wg sync.WaitGroup
				var used agent.ContextLength
				wg.Go(func() { used = rt.ContextLength(ctx) }) // what agent.Runtime.Run does first
				synctest.Wait()                                // it waits on the server
				wg.Go(func() { checkModelServer(ctx, client, srv.URL+"/v1", rt, logger) })
				wg.Wait()

				if used.Tokens != c.tokens {
					t.Fatalf("the runtime works with %d tokens, want %d", used.Tokens, c.tokens)
				}
				out := logs.String()
				for _, w := range []string{"model server reached", fmt.Sprintf("context_tokens=%d ", c.tokens), c.from} {
					if !strings.Contains(out, w) {
						t.Errorf("no %q in the log:\n%s", w, out)
					}
				}
				if c.fromNot != "" && strings.Contains(out, c.fromNot) {
					t.Errorf("%q in the log:\n%s", c.fromNot, out)
				}
			})
		})
	}
}

// noTasks and noExecutor stand for the runtime's parts this test does
// not reach: it does not Run the runtime.
type noTasks struct{ agent.Tasks }
type noExecutor struct{ agent.Executor }
