package agent_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A model server that refuses the request for a reason retrying does
// not mend (a bad API key, a model or path it does not have, an invalid
// request) fails the step at its first call, without a wait: the job
// waits with its work kept, its reason naming the status and what to
// check, an error line in the log for the operator, and the requester is
// told, as of an outage, that it is on the node's side. Before, it was
// retried 3 times with backoff, as a 503 is.
func TestModelServerRefusalFailsAtOnce(t *testing.T) {
	for _, c := range []struct {
		status int
		msg    string
		check  string // what the operator is told to check
	}{
		{401, "Incorrect API key provided: sk-abc", "agent.llm_api_key_file"},
		{403, "this key may not use the model", "agent.llm_api_key_file"},
		{404, `model "qwen" not found, try pulling it first`, "agent.llm_url"},
		{400, "Invalid model name passed in model=qwen", "agent.llm_model"},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.Push(llmtest.Error(c.status, c.msg), llmtest.Text(finishAnswer))
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			task := r.send(t, "go")
			// A backoff of an hour: a retry would not end within the test.
			slow := func(cfg *agent.Config) {
				cfg.Backoff, cfg.Logger = time.Hour, slog.New(slog.NewTextHandler(&logs, nil))
			}
			got := r.runWith(t, slow, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
			if got.Status.State != tasks.StateInputRequired || srv.Calls() != 1 {
				t.Fatalf("task %s %q after %d calls; want input_required after 1", got.Status.State, got.Status.Message, srv.Calls())
			}
			for _, want := range []string{"on the node's side", "the work so far is kept", "send a message to try again"} {
				if !strings.Contains(got.Status.Message, want) {
					t.Errorf("the requester was told %q; want %q", got.Status.Message, want)
				}
			}
			if strings.Contains(got.Status.Message, c.msg) {
				t.Errorf("the requester was told the server's error: %q", got.Status.Message)
			}
			j, err := r.store.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"HTTP " + strconv.Itoa(c.status), c.check} {
				if !strings.Contains(j.Reason, want) {
					t.Errorf("job reason %q; want %q", j.Reason, want)
				}
			}
			line := ""
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, "level=ERROR") && strings.Contains(l, task.ID) {
					line = l
				}
			}
			if !strings.Contains(line, strconv.Itoa(c.status)) || !strings.Contains(line, c.check) {
				t.Errorf("no error line naming the status and %s in the log:\n%s", c.check, logs.String())
			}
			if strings.Contains(logs.String(), "model call failed; retrying") {
				t.Errorf("the call was retried:\n%s", logs.String())
			}
			h, err := r.store.History(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := agent.Replay(h, 64<<10); err != nil {
				t.Errorf("replay: %v", err)
			}
		})
	}
}

// A model server that refuses the supervisor's call as invalid (HTTP 400)
// names the supervisor's settings in the advice: its model
// (agent.review_model) and its reasoning effort
// (agent.review_reasoning_effort), which are what is sent with its calls.
// Before, the advice named the worker's, agent.reasoning_effort, which an
// operator who had set the supervisor's apart would change in vain.
func TestSupervisorRefusalNamesReviewSettings(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(400, `invalid reasoning_effort "xhigh" for this model`))
	review, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "judge", ReasoningEffort: "xhigh"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	set := func(cfg *agent.Config) {
		cfg.Review, cfg.ReviewModel, cfg.ReviewModelName, cfg.Backoff = true, review, "judge", time.Hour
	}
	got := r.runWith(t, set, &scripted{answers: []string{finishAnswer}}, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired || srv.Calls() != 1 {
		t.Fatalf("task %s %q after %d supervisor calls; want input_required after 1", got.Status.State, got.Status.Message, srv.Calls())
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HTTP 400", "agent.review_reasoning_effort", "agent.review_model"} {
		if !strings.Contains(j.Reason, want) {
			t.Errorf("job reason %q; want %q", j.Reason, want)
		}
	}
}

// Of the model server's error statuses, a time-out, a conflict, too early,
// a rate limit and its own failures are retried; another 4xx is not.
func TestModelErrorTransient(t *testing.T) {
	for status, want := range map[int]bool{
		400: false, 401: false, 403: false, 404: false, 405: false, 413: false, 422: false,
		408: true, 409: true, 425: true, 429: true, 500: true, 502: true, 503: true, 504: true,
	} {
		if got := (&agent.ModelError{Status: status}).Transient(); got != want {
			t.Errorf("HTTP %d: Transient %t, want %t", status, got, want)
		}
	}
}

// A model server that refuses the request as too large (HTTP 413), in
// words that name no context length (a proxy's body limit, a per-minute
// token limit), has the prompt condensed and sent again once, as a
// context-length refusal has; refused again, the job waits STUCK
// (context_window), its reason naming the setting that bounds the
// prompt. Before, the first 413 failed the step as an invalid request,
// with the advice to check the model name.
func TestRequestTooLargeCondensed(t *testing.T) {
	const page = "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusRequestEntityTooLarge, Body: page}
	})
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	// The task names a file, whose text goes with it in the first
	// step's prompt: the first step's prompt has something to condense.
	if err := os.WriteFile(filepath.Join(r.dir, "notes.md"), []byte(strings.Repeat("a line of the notes\n", 250)), 0o600); err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "summarize notes.md")
	got := r.runWith(t, func(cfg *agent.Config) { cfg.Backoff = time.Hour }, m, task.ID,
		tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, string(agent.PatternContextWindow)) {
		t.Fatalf("task %s %q after %d calls; want input_required, %s", got.Status.State, got.Status.Message, srv.Calls(), agent.PatternContextWindow)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d calls; want 2: the prompt condensed once", len(reqs))
	}
	size := func(req llmtest.Request) (n int) {
		for _, m := range req.Messages {
			n += len(m.Content)
		}
		return n
	}
	if a, b := size(reqs[0]), size(reqs[1]); b >= a {
		t.Errorf("prompts of %d then %d bytes; want the second smaller", a, b)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HTTP 413", "agent.context_tokens"} {
		if !strings.Contains(j.Reason, want) {
			t.Errorf("job reason %q; want %q", j.Reason, want)
		}
	}
}

// A model server whose TLS certificate this machine does not trust (its
// own authority, or another name than the URL's) fails the step at its
// first call, as a refused API key does: asked again, the handshake
// fails the same way. The operator is told it is the certificate and
// what to check; before, it was retried as an outage, with backoff.
func TestModelServerUntrustedCertificateFailsAtOnce(t *testing.T) {
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request reached the server through an untrusted handshake: %s", r.URL)
	}))
	t.Cleanup(tls.Close)
	r := newRig(t, testdb.SQLite(t))
	m, err := llm.New(llm.Config{BaseURL: tls.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	task := r.send(t, "go")
	slow := func(cfg *agent.Config) {
		cfg.Backoff, cfg.Logger = time.Hour, slog.New(slog.NewTextHandler(&logs, nil))
	}
	got := r.runWith(t, slow, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "on the node's side") {
		t.Fatalf("task %s %q; want input_required, on the node's side", got.Status.State, got.Status.Message)
	}
	if strings.Contains(logs.String(), "model call failed; retrying") {
		t.Errorf("the call was retried:\n%s", logs.String())
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"certificate", "agent.llm_url"} {
		if !strings.Contains(j.Reason, want) {
			t.Errorf("job reason %q; want %q", j.Reason, want)
		}
	}
}
