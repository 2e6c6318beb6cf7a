package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// shrinkingServer is a broken or hostile model server: it refuses every
// prompt as over its context, naming a context one token smaller at each
// refusal (from 32767, its model list giving 32768). After limit calls
// it refuses the API key instead, so that a runtime that keeps asking
// still ends.
type shrinkingServer struct {
	mu    sync.Mutex
	calls int
	limit int
}

func (s *shrinkingServer) ContextTokens(context.Context) (int, error) { return 32768, nil }

func (s *shrinkingServer) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls > s.limit {
		return nil, &agent.ModelError{Status: 401, Message: "invalid api key"}
	}
	n := 32768 - s.calls
	return nil, &agent.ModelError{Status: 400, ContextLength: true, ContextTokens: n,
		Message: fmt.Sprintf("request exceeds the available context size (%d tokens)", n)}
}

// A server whose every refusal names a smaller context than the last
// cannot keep a job asking: one refusal naming a smaller context is
// not counted against condensing, the next are, so the job is STUCK
// (context_window) after condensing once, as with any other refusal.
// Before, each such refusal was retried at once, uncounted, and the job
// asked the server again and again (until it named a context of 1).
func TestServerContextRefusalsEnd(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := readingJob(t, r, 1)
	m := &shrinkingServer{limit: 50}
	got := r.runWith(t, func(c *agent.Config) { c.ContextTokens, c.Backoff = 0, time.Hour }, m, task.ID,
		tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	m.mu.Lock()
	defer m.mu.Unlock()
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, string(agent.PatternContextWindow)) || m.calls != 3 {
		t.Fatalf("task %s %q after %d calls; want input_required, %s, after 3 calls", got.Status.State, got.Status.Message, m.calls, agent.PatternContextWindow)
	}
}

// A refusal naming a context too small for any prompt the runtime
// builds (less than the answer's cap and the prompt's floor of 512
// tokens: a server's n_ctx of 10) does not lower the context every job's
// prompts are built for: it is a refusal as one that names none (the
// prompt condensed by half, once). Before, every prompt that followed,
// of every job, was built for 512 tokens.
func TestTinyServerContextNotTaken(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	const reads = 4
	task := readingJob(t, r, reads)
	for i := range reads {
		if err := os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("in-%d.md", i+1)), []byte(strings.Repeat("a line of the input\n", 200)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// It refuses its first prompt naming n_ctx 10, then takes any.
	m := &llamaServer{nCtx: 1 << 30, reads: reads}
	refused := false
	m2 := modelFunc(func(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
		if !refused {
			refused = true
			return nil, &agent.ModelError{Status: 400, ContextLength: true, ContextTokens: 10, Message: "request exceeds the available context size (10 tokens)"}
		}
		return m.Complete(ctx, p)
	})
	got := r.runWith(t, func(c *agent.Config) { c.ContextTokens, c.Backoff = 16384, time.Hour }, m2, task.ID,
		tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	m.mu.Lock()
	defer m.mu.Unlock()
	if got.Status.State != tasks.StateCompleted || len(m.prompts) == 0 {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
	// The last prompt holds the four files read (about 1000 tokens
	// each), within half of 16384 less the answer's cap; built for 512
	// tokens, all but the last are condensed.
	if last := m.prompts[len(m.prompts)-1]; last < 5000 {
		t.Errorf("prompts of %v tokens after a refusal naming a context of 10; want the last over 5000 (built for half of 16384)", m.prompts)
	}
}

// modelFunc is a Model of a function.
type modelFunc func(context.Context, agent.Prompt) (*agent.Completion, error)

func (f modelFunc) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	return f(ctx, p)
}

// A server's refusal naming a smaller context lowers the context of the
// prompts of the model that was refused, not of another: the
// supervisor's model (agent.review_model) may be another, with a context
// of its own. Here the worker's model is refused naming 4096 tokens, the
// supervisor's prompt is still built for 16384 and holds the evidence
// files whole. Before, it was built for 4096: the files cut to 2048
// bytes in all.
func TestServerContextPerModel(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	var evidence []string
	for i := range 3 {
		name := fmt.Sprintf("in-%d.md", i+1)
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(strings.Repeat("a line of the input\n", 200)), 0o600); err != nil {
			t.Fatal(err)
		}
		evidence = append(evidence, `"/sandbox/`+name+`"`)
	}
	task := r.send(t, "go")
	var mu sync.Mutex
	workerCalls, reviewPrompt := 0, 0
	worker := modelFunc(func(context.Context, agent.Prompt) (*agent.Completion, error) {
		mu.Lock()
		defer mu.Unlock()
		if workerCalls++; workerCalls == 1 {
			return nil, &agent.ModelError{Status: 400, ContextLength: true, ContextTokens: 4096, Message: "request exceeds the available context size (4096 tokens)"}
		}
		return &agent.Completion{Text: `{"action":"COMPLETED","evidence_files":[` + strings.Join(evidence, ",") + `],"summary_for_supervisor":"done"}`}, nil
	})
	judge := modelFunc(func(_ context.Context, p agent.Prompt) (*agent.Completion, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range p.Messages {
			reviewPrompt += len(m.Content)
		}
		return nil, &agent.ModelError{Status: 401, Message: "invalid api key"}
	})
	set := func(c *agent.Config) {
		c.ContextTokens, c.Backoff = 16384, time.Hour
		c.Review, c.ReviewModel, c.ReviewModelName, c.ModelName = true, judge, "judge", "coder"
	}
	got := r.runWith(t, set, worker, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if got.Status.State != tasks.StateInputRequired || workerCalls != 2 || reviewPrompt < 12000 {
		t.Fatalf("task %s %q, %d worker calls, the supervisor's prompt of %d bytes; want input_required after 2 worker calls, the supervisor's prompt holding its 12000 bytes of evidence", got.Status.State, got.Status.Message, workerCalls, reviewPrompt)
	}
}
