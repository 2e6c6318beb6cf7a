package llm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
)

// A success answer the call's time-out cut, whichever deadline ended it
// (the client's Timeout, or the caller's: the runtime's request time-out,
// or the job's time limit), is an *agent.AnsweredError counting the bytes
// the server had sent, which still unwraps to the deadline: the server
// was doing the work, and may charge for it. Before, the caller's
// deadline made it a bare error that cost the job nothing (the node sets
// both deadlines alike, and the caller's is the first), and the client's
// counted no byte of it: a server that dripped every answer until the
// time-out ran the job's calls for free, past max_cost_cents. A caller's
// cancel, or a server that sent no status before the deadline, is no
// AnsweredError.
func TestCutAnswerCounted(t *testing.T) {
	head := `{"choices":[{"message":{"content":"` + strings.Repeat("x", 4000)
	// Each handler reads the request first: the server then sees the
	// client go, and ends the request's context.
	dripping := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, head)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	silent := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}
	const wait = 300 * time.Millisecond
	for _, c := range []struct {
		name     string
		h        http.HandlerFunc
		cfg      llm.Config
		ctx      func(context.Context) (context.Context, context.CancelFunc)
		answered bool
	}{
		{"the caller's deadline", dripping, llm.Config{}, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, wait)
		}, true},
		{"the client's Timeout", dripping, llm.Config{Timeout: wait}, nil, true},
		{"no status sent", silent, llm.Config{Timeout: wait}, nil, false},
		{"no status sent, the caller's deadline", silent, llm.Config{}, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, wait)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := serve(t, c.h)
			c.cfg.BaseURL, c.cfg.Model = srv+"/v1", "m1"
			m, err := llm.New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if c.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = c.ctx(ctx)
				defer cancel()
			}
			_, err = m.Complete(ctx, prompt("x"))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v; want DeadlineExceeded", err)
			}
			var ae *agent.AnsweredError
			switch {
			case c.answered && (!errors.As(err, &ae) || ae.AnswerBytes != len(head)):
				t.Errorf("err = %#v; want an AnsweredError of the %d bytes sent", err, len(head))
			case !c.answered && errors.As(err, &ae):
				t.Errorf("err = %v is an AnsweredError; the server sent no status", err)
			}
		})
	}

	// The caller's cancel (the job canceled, the node stopping) is not
	// the server's answer.
	started := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, head)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	})
	m, err := llm.New(llm.Config{BaseURL: srv + "/v1", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	_, err = m.Complete(ctx, prompt("x"))
	var ae *agent.AnsweredError
	if !errors.Is(err, context.Canceled) || errors.As(err, &ae) {
		t.Errorf("canceled: err = %v; want Canceled, no AnsweredError", err)
	}
}

// serve starts a server of h, closed when the test ends, and returns its
// URL.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
