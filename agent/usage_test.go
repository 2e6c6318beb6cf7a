package agent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// liar is a model server that reports a negative token count on its
// first answer, then honest ones: reads of in-N.md, each of its calls
// costing 0.4 cents at a price of 1 USD per million tokens.
type liar struct{ calls atomic.Int64 }

func (l *liar) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	n := l.calls.Add(1)
	c := &agent.Completion{Text: readAnswer(int(n)), PromptTokens: 3000, CompletionTokens: 1000}
	if n == 1 {
		c.PromptTokens = -1_000_000_000
	}
	return c, nil
}

// A negative token count from the model server counts as nothing: it
// cannot lower the job's cost below what it spent, nor lift its limit.
func TestNegativeUsageCountsAsNothing(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := readingJob(t, r, 10)
	m := &liar{}
	got := r.runWith(t, func(c *agent.Config) {
		c.MaxCostCents, c.PricePerMTokPrompt, c.PricePerMTokAnswer, c.MaxSteps = 1, 1, 1, 30
	}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
		t.Fatalf("task %s %q: want failed, HALTED_COST", got.Status.State, got.Status.Message)
	}
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The lie's call counts 0.1 cents (its completion); each honest one 0.4.
	if j.CostCents < 1 || j.CostCents > 1.5 || j.PromptTokens < 0 || m.calls.Load() > 4 {
		t.Fatalf("cost %.2f cents, prompt tokens %d, %d calls: the lie lowered the cost", j.CostCents, j.PromptTokens, m.calls.Load())
	}
}

// failing answers each call with the next of its errors.
type failing struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (f *failing) Complete(ctx context.Context, _ agent.Prompt) (*agent.Completion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.errs) == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return nil, err
}

// A prompt the server refuses as too long is condensed once and then,
// refused again, makes the job STUCK naming the context window, however
// the server words it; a time-out before it is not taken for one.
func TestContextLengthRefusals(t *testing.T) {
	tooLong := func() error {
		return &agent.ModelError{Status: 400, ContextLength: true, Message: "too many tokens: 9000 > 4096"}
	}
	timeout := fmt.Errorf("llm: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name  string
		errs  []error
		calls int
	}{
		{"refused twice", []error{tooLong(), tooLong(), tooLong(), tooLong()}, 2},
		{"after a time-out", []error{timeout, tooLong(), tooLong(), tooLong()}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := r.send(t, "go")
			m := &failing{errs: c.errs}
			got := r.runWith(t, func(c *agent.Config) { c.Backoff = time.Millisecond }, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
			if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, string(agent.PatternContextWindow)) {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.calls != c.calls {
				t.Fatalf("%d calls, want %d", m.calls, c.calls)
			}
		})
	}
}

// sized is a model whose server says its context is small: it records
// each call's answer cap and finishes at once.
type sized struct{ caps []int }

func (s *sized) ContextTokens(context.Context) (int, error) { return 2048, nil }

func (s *sized) Complete(_ context.Context, p agent.Prompt) (*agent.Completion, error) {
	s.caps = append(s.caps, p.MaxTokens)
	return &agent.Completion{Text: `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"done","action":"FINISH","args":{"response":"done"}}`}, nil
}

// A model whose server gives a context no larger than max_tokens gets
// answers capped at a quarter of it, leaving the prompt room, instead of
// a budget below nothing.
func TestSmallContextCapsAnswers(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := r.send(t, "go")
	m := &sized{}
	got := r.runWith(t, func(c *agent.Config) { c.ContextTokens, c.MaxTokens = 0, 2048 }, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted || len(m.caps) != 1 || m.caps[0] != 512 {
		t.Fatalf("task %s %q, answer caps %v: want completed, capped at 512", got.Status.State, got.Status.Message, m.caps)
	}
}

// readingJob writes the files in-1.md … in-n.md into r's workspace and
// sends a task for the models that read them (see readAnswer).
func readingJob(t *testing.T, r *rig, n int) *tasks.Task {
	t.Helper()
	for i := range n {
		if err := os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("in-%d.md", i+1)), []byte("input\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r.send(t, "read")
}

// readAnswer is a model's n-th answer in a readingJob: READ_FILE of in-n.md.
func readAnswer(n int) string {
	return fmt.Sprintf(`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-%012d","reasoning":"reading","action":"READ_FILE","args":{"path":"/sandbox/in-%d.md"}}`, n, n)
}

// flaky fails its first call (with err), then finishes the job.
type flaky struct {
	err   error
	calls atomic.Int64
}

func (f *flaky) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	if f.calls.Add(1) == 1 {
		return nil, f.err
	}
	return &agent.Completion{Text: `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"done","action":"FINISH","args":{"response":"done"}}`}, nil
}

// The wait before a model call is tried again counts toward the job's
// max_time: before, only the calls did, and a job whose server kept
// asking it to wait ran past its time. Nor does a server's Retry-After
// make the job wait past its time: the wait stops at the limit.
func TestBackoffCountsAsJobTime(t *testing.T) {
	for _, c := range []struct {
		name           string
		err            error
		backoff, limit time.Duration
	}{
		{"backoff", errors.New("503 Service Unavailable"), 100 * time.Millisecond, 50 * time.Millisecond},
		{"Retry-After past the limit", &agent.ModelError{Status: 429, Message: "slow down", RetryAfter: time.Minute}, time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := r.send(t, "go")
			m := &flaky{err: c.err}
			got := r.runWith(t, func(cfg *agent.Config) { cfg.Backoff, cfg.MaxTime = c.backoff, c.limit }, m, task.ID,
				tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "max_time_minutes") || m.calls.Load() != 1 {
				t.Fatalf("task %s %q after %d calls: want failed at max_time_minutes after the wait", got.Status.State, got.Status.Message, m.calls.Load())
			}
			j, err := r.store.Get(context.Background(), task.ID)
			if err != nil || j.Seconds > 1 {
				t.Fatalf("the job's time %.3f s, %v: want it stopped at its limit of %v", j.Seconds, err, c.limit)
			}
		})
	}
}

// hanging is a model server that answers no call: each waits for its
// context; as a worker or a delegate (stalled), its error is theirs.
type hanging struct {
	worker bool
	calls  atomic.Int64
}

func (h *hanging) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	h.calls.Add(1)
	<-ctx.Done()
	if h.worker && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: the worker did not answer step %d within the request time-out (timeout)", agent.ErrWorkerFailed, p.Step)
	}
	return nil, ctx.Err()
}

// A model call ends at the job's time limit: before, only the request
// time-out bounded it, and a job of a minute (a peer's
// time_threshold_minutes) whose model server, worker or delegate stalled
// ran the whole time-out (2 minutes by default) past its limit. The job
// halts at its time, not as a failed worker.
func TestModelCallStopsAtTheTimeLimit(t *testing.T) {
	for _, worker := range []bool{false, true} {
		name := "model server"
		if worker {
			name = "worker"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := r.send(t, "go")
			m := &hanging{worker: worker}
			got := r.runWith(t, func(cfg *agent.Config) { cfg.MaxTime, cfg.RequestTimeout = 50*time.Millisecond, time.Hour }, m, task.ID,
				tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "max_time_minutes") || m.calls.Load() != 1 {
				t.Fatalf("task %s %q after %d calls: want failed at max_time_minutes", got.Status.State, got.Status.Message, m.calls.Load())
			}
			j, err := r.store.Get(context.Background(), task.ID)
			if err != nil || j.Seconds > 1 {
				t.Fatalf("the job's time %.3f s, %v: want it stopped at its limit", j.Seconds, err)
			}
		})
	}
}

// echoing is a model server whose response names as its model whatever it
// was told: here a secret.
type echoing struct{ model string }

func (e *echoing) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	return &agent.Completion{Text: `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`,
		Model: e.model, PromptTokens: 10, CompletionTokens: 5}, nil
}

// The model the server names in its response is stored in the history
// redacted, like the rest of what it sends: before, a server that echoed
// a secret there had it stored as it was.
func TestServerModelNameIsRedacted(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := r.send(t, "go")
	const key = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
	got := r.runWith(t, func(c *agent.Config) { c.Secrets = []string{"the-api-key-of-the-node"} },
		&echoing{model: "qwen " + key + " the-api-key-of-the-node"}, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	m := h.Interactions[0].Request.Metadata.Model
	if strings.Contains(m, key) || strings.Contains(m, "the-api-key-of-the-node") || !strings.HasPrefix(m, "qwen ") {
		t.Fatalf("the history keeps the model %q: want it redacted", m)
	}
}

// boaster is a model server that reports the largest token counts it can
// on every call: reads of in-N.md.
type boaster struct{ calls atomic.Int64 }

func (b *boaster) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	n := b.calls.Add(1)
	return &agent.Completion{Text: readAnswer(int(n)), PromptTokens: math.MaxInt, CompletionTokens: math.MaxInt}, nil
}

// Token counts too large to add up saturate the job's totals instead of
// wrapping them negative, and the job's limits still halt it: its steps,
// and its cost when calls are priced.
func TestHugeUsageSaturates(t *testing.T) {
	for _, c := range []struct {
		name   string
		price  float64
		status string
	}{
		{"steps", 0, "max_steps"},
		{"cost", 1, "HALTED_COST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := readingJob(t, r, 10)
			m := &boaster{}
			got := r.runWith(t, func(cfg *agent.Config) {
				cfg.MaxCostCents, cfg.PricePerMTokPrompt, cfg.PricePerMTokAnswer, cfg.MaxSteps = 100, c.price, c.price, 2
			}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, c.status) {
				t.Fatalf("task %s %q: want failed, %s", got.Status.State, got.Status.Message, c.status)
			}
			j, err := r.store.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.PromptTokens != math.MaxInt64 || j.CompletionTokens != math.MaxInt64 {
				t.Fatalf("after %d calls: prompt tokens %d, completion tokens %d; want both saturated at %d",
					m.calls.Load(), j.PromptTokens, j.CompletionTokens, int64(math.MaxInt64))
			}
		})
	}
}

// llamaServer is a model whose server runs with a smaller context than
// its model list gives (llama-server run with -c 8192 for a model
// trained with 32768): it refuses a prompt of more tokens than nCtx (four
// bytes a token, as the runtime counts them) as llama-server does, its
// context in the refusal; it reads in-1.md … in-reads.md (readAnswer),
// then finishes.
type llamaServer struct {
	mu      sync.Mutex
	nCtx    int
	reads   int
	done    int   // the answers given
	prompts []int // each call's prompt, in tokens
}

func (s *llamaServer) ContextTokens(context.Context) (int, error) { return 32768, nil }

func (s *llamaServer) Complete(_ context.Context, p agent.Prompt) (*agent.Completion, error) {
	n := 0
	for _, m := range p.Messages {
		n += len(m.Content)
	}
	n /= 4
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompts = append(s.prompts, n)
	if n > s.nCtx {
		return nil, &agent.ModelError{Status: 400, ContextLength: true, ContextTokens: s.nCtx,
			Message: fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", n, s.nCtx)}
	}
	if s.done++; s.done <= s.reads {
		return &agent.Completion{Text: readAnswer(s.done)}, nil
	}
	return &agent.Completion{Text: `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000099","reasoning":"done","action":"FINISH","args":{"response":"done"}}`}, nil
}

// A server that refuses a prompt as over its context and names that
// context (llama-server's n_ctx), smaller than the one the prompt was
// built for, has the next prompts built for its own: the job goes on.
// Before, the prompt was built for half the context it was, still over
// the server's, and the job was STUCK (context_window) at the second
// refusal.
func TestServerContextFromRefusal(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	const reads = 6
	task := readingJob(t, r, reads)
	for i := range reads {
		if err := os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("in-%d.md", i+1)), []byte(strings.Repeat("a line of the input\n", 700)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := &llamaServer{nCtx: 8192, reads: reads}
	got := r.runWith(t, func(c *agent.Config) { c.ContextTokens, c.Backoff = 0, time.Hour }, m, task.ID,
		tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	m.mu.Lock()
	defer m.mu.Unlock()
	refused := 0
	for _, n := range m.prompts {
		if n > m.nCtx {
			refused++
		}
	}
	if got.Status.State != tasks.StateCompleted || refused != 1 {
		t.Fatalf("task %s %q, prompts of %v tokens; want completed, one prompt over %d tokens", got.Status.State, got.Status.Message, m.prompts, m.nCtx)
	}
}
