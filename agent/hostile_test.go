package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// mute is a model server that reports usage tokens on each side of each
// call (0: no usage at all; see readAnswer).
type mute struct {
	usage int
	mu    sync.Mutex
	calls int
}

func (m *mute) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	return &agent.Completion{Text: readAnswer(m.calls), PromptTokens: m.usage, CompletionTokens: m.usage}, nil
}

// A server that reports no usage is priced at the estimate of what was
// sent and answered, and one that reports less than the text can hold at
// the least the text can hold: before, the first's calls cost nothing,
// the second's next to nothing, and the job ran to max_steps past any
// cost limit.
func TestUnderReportedUsagePricedAtLeastTheText(t *testing.T) {
	for _, c := range []struct {
		name     string
		usage    int
		maxCalls int
	}{
		// A prompt of about 2,000 tokens (four bytes a token) at 10 USD
		// a million: 2 cents a call, over 5 cents at the third.
		{"none", 0, 4},
		// At least a token for eight bytes: 1 cent a call.
		{"one token", 1, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := readingJob(t, r, 20)
			m := &mute{usage: c.usage}
			got := r.runWith(t, func(c *agent.Config) {
				c.MaxCostCents, c.PricePerMTokPrompt, c.PricePerMTokAnswer, c.MaxSteps = 5, 10, 10, 20
			}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
				t.Fatalf("task %s %q after %d calls: want failed, HALTED_COST", got.Status.State, got.Status.Message, m.calls)
			}
			if m.calls > c.maxCalls {
				t.Fatalf("%d calls before the cost limit, want at most %d", m.calls, c.maxCalls)
			}
		})
	}
}

// A refused answer comes back to the model cut: before, an answer over
// max_answer_bytes was the last step, always sent whole, and the next
// prompt was 100,000 tokens for a budget of 8,000.
func TestRefusedAnswerCutInPrompt(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "go")
	// One answer over max_answer_bytes (what a server's response cap
	// still lets through), then FINISH.
	m := &scripted{answers: []string{strings.Repeat("A", 400<<10),
		`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"done","action":"FINISH","args":{"response":"done"}}`}}
	got := r.runWith(t, nil, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted || len(m.prompts) != 2 {
		t.Fatalf("task %s %q after %d calls", got.Status.State, got.Status.Message, len(m.prompts))
	}
	n := 0
	for _, msg := range m.prompts[1] {
		n += len(msg.Content)
	}
	if n > 8000*4 {
		t.Fatalf("the second prompt is %d bytes, over its budget of 8,000 tokens", n)
	}
	its, err := r.store.Interactions(ctx, task.ID)
	if err != nil || len(its[0].Response.RawResponse) != 400<<10 {
		t.Fatalf("the history keeps the answer whole: %v", err)
	}
}

// tinyContext is a model whose server says its context is 3 tokens.
type tinyContext struct{ sized }

func (*tinyContext) ContextTokens(context.Context) (int, error) { return 3, nil }

// However small a context the server gives, the answer keeps a cap: a
// quarter of 3 tokens was 0, which sends no max_tokens at all.
func TestTinyContextKeepsACap(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := r.send(t, "go")
	m := &tinyContext{}
	r.runWith(t, func(c *agent.Config) { c.ContextTokens, c.MaxTokens = 0, 2048 }, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if len(m.caps) == 0 || m.caps[0] < 1 {
		t.Fatalf("answer caps %v: want at least 1", m.caps)
	}
}

// unreachable is a model server that cannot be reached: its errors name
// its address.
type unreachable struct{}

func (unreachable) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	return nil, errors.New(`Post "http://10.1.2.3:11434/v1/chat/completions": dial tcp 10.1.2.3:11434: connect: connection refused`)
}

// A job whose model server keeps failing waits for a human: the operator
// sees why (the job's reason), the task's requester only that the model
// server failed, not its address.
func TestModelServerErrorsStayWithTheOperator(t *testing.T) {
	t.Run("model server", func(t *testing.T) {
		failingModelStaysWithTheOperator(t, unreachable{}, "the model server failed", "10.1.2.3:11434")
	})
	// A worker's error names its command and carries its error output.
	t.Run("worker", func(t *testing.T) {
		failingModelStaysWithTheOperator(t, brokenWorker{}, "the worker failed", "/opt/acme/secret-worker")
	})
}

// brokenWorker is a worker that exits before it answers, printing what
// only the operator may read.
type brokenWorker struct{}

func (brokenWorker) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	return nil, fmt.Errorf("%w: the worker exited (exit status 1) before answering step 0; its last error output: open /opt/acme/secret-worker/key.pem: permission denied (crash)", agent.ErrWorkerFailed)
}

// failingModelStaysWithTheOperator runs a job on m, which fails: the job
// waits for a human; the task's requester is told shown, the operator's
// reason also names private.
func failingModelStaysWithTheOperator(t *testing.T, m agent.Model, shown, private string) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "go")
	got := r.runWith(t, func(c *agent.Config) { c.Backoff = time.Millisecond }, m, task.ID,
		tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, shown) ||
		strings.Contains(got.Status.Message, private) {
		t.Fatalf("task %s %q: want input_required, %q without %q", got.Status.State, got.Status.Message, shown, private)
	}
	j, err := r.store.Get(ctx, task.ID)
	if err != nil || !strings.Contains(j.Reason, shown) || !strings.Contains(j.Reason, private) {
		t.Fatalf("job reason %q, %v: want the whole error for the operator", j.Reason, err)
	}
}

// brokenDatabase is an executor whose database cannot be reached: its
// error names the database's address.
type brokenDatabase struct{ agent.Executor }

func (brokenDatabase) Run(context.Context, executor.Request) (*executor.Result, error) {
	return nil, errors.New("executor: begin: dial tcp 10.0.0.5:5432: connect: connection refused")
}

// A job the node itself cannot go on with (its database, its executor)
// waits for a human: the operator reads why in the job's reason, the
// task's requester only that the node failed, not the database's address.
func TestNodeFailuresStayWithTheOperator(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := readingJob(t, r, 1)
	got := r.runWith(t, func(c *agent.Config) { c.Executor = brokenDatabase{c.Executor} }, &mute{}, task.ID,
		tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "could not go on") || strings.Contains(got.Status.Message, "10.0.0.5") {
		t.Fatalf("task %s %q: want input_required, the node's failure without the database's address", got.Status.State, got.Status.Message)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil || !strings.Contains(j.Reason, "10.0.0.5:5432") {
		t.Fatalf("job reason %q, %v: want the whole error for the operator", j.Reason, err)
	}
}

// A peer's job request cannot start its job in the node's review phase:
// "review" is the phase the node enters when a worker's COMPLETED is
// reviewed, and a job in it is answered by the supervisor (its prompt,
// agent.review_model) whatever agent.review says. Before, a request with
// phase "review" skipped the worker: the supervisor's first answer
// completed the task, with review off.
func TestJobRequestCannotStartInReview(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	req := `{"job_id":"j","phase":"review","context_files":[],"system_prompt":"","task_description":"say hello","metadata":{"accepted_formats":[]}}`
	b, err := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m", "role": "user",
		"parts": []any{map[string]any{"data": json.RawMessage(req)}}}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := taskstest.Send(context.Background(), r.svc, "alice", b)
	if err != nil {
		t.Fatal(err)
	}
	m := &scripted{answers: []string{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"hello"}`}}
	got := r.run(t, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "/phase") || len(m.prompts) != 0 {
		t.Fatalf("task %s %q after %d model calls: want failed, the request refused at /phase", got.Status.State, got.Status.Message, len(m.prompts))
	}
}

// An answer refused for its size whose stored copy redaction made
// smaller (a secret in it) still replays as refused: before, the stored
// text parsed under max_answer_bytes and replay said the history was
// inconsistent ("recorded as invalid, but it parses").
func TestOversizedAnswerWithASecretReplays(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "go")
	const max = 4 << 10
	big := `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"WRITE_FILE","args":{"path":"/sandbox/a.md","content":"sk-` +
		strings.Repeat("A", max) + `"}}`
	m := &scripted{answers: []string{big,
		`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000002","reasoning":"done","action":"FINISH","args":{"response":"done"}}`}}
	got := r.runWith(t, func(c *agent.Config) { c.MaxAnswerBytes = max }, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.Interactions[0].Response.Kind != agent.KindInvalid || !h.Interactions[0].Response.Redacted {
		t.Fatalf("first answer recorded %s (redacted %v), want invalid and redacted", h.Interactions[0].Response.Kind, h.Interactions[0].Response.Redacted)
	}
	if err := agent.Replay(h, max); err != nil {
		t.Fatal(err)
	}
}

// An answer whose stored copy redaction made longer (a short API key,
// such as vLLM's "EMPTY", in a summary of 500 characters) still replays
// as the answer it was: before, replay found the summary over its
// maximum and said the answer did not parse.
func TestLengthenedAnswerReplays(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "go")
	summary := strings.Repeat("EMPTY ", 10) + strings.Repeat("x", 440)
	m := &scripted{answers: []string{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + summary + `"}`}}
	got := r.runWith(t, func(c *agent.Config) { c.Secrets = []string{"EMPTY"} }, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Fatal(err)
	}
}

// A path the proposal schema lets through but the sandbox refuses (dots
// that are not dots, a bidi override, a name not in NFC) is refused when
// the proposal arrives, as a validation error naming the field and the
// rule, and the job's history keeps that refusal: before, the action was
// judged, audited as valid and refused only by the sandbox, as
// EXECUTION_FAILED with neither field nor rule (a RENAME_FILE's refusal
// did not say whether its source or its destination was wrong).
func TestLookalikePathsRefusedWithFieldAndRule(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(r.dir, "ok.md"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	cases := []struct{ action, args, field, rule string }{
		{"WRITE_FILE", `{"path":"/sandbox/\uff0e\uff0e/x.md","content":"x"}`, "/args/path", "lookalike"},
		{"RENAME_FILE", `{"source":"/sandbox/ok.md","destination":"/sandbox/\u202edm.exe.md"}`, "/args/destination", "format_char"},
		{"READ_FILE", `{"path":"/sandbox/cafe\u0301.md"}`, "/args/path", "not_nfc"},
	}
	var answers []string
	for i, c := range cases {
		answers = append(answers, fmt.Sprintf(`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-%012d","reasoning":"r","action":%q,"args":%s}`, i+1, c.action, c.args))
	}
	answers = append(answers, `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000099","reasoning":"done","action":"FINISH","args":{"response":"done"}}`)
	got := r.run(t, &scripted{answers: answers}, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Interactions) != len(cases)+1 {
		t.Fatalf("%d interactions, want %d", len(h.Interactions), len(cases)+1)
	}
	for i, c := range cases {
		o := h.Interactions[i].Observation
		var out struct {
			Code  string `json:"error_code"`
			Field string `json:"field"`
			Rule  string `json:"rule"`
		}
		if o == nil {
			t.Fatalf("%s: no observation in the history", c.action)
		}
		if o.Outcome != agent.ObsFailed || json.Unmarshal(o.Output, &out) != nil ||
			out.Code != "VALIDATION_ERROR" || out.Field != c.field || out.Rule != c.rule {
			t.Errorf("%s %s: observation %s; want VALIDATION_ERROR at %s, rule %s", c.action, c.args, o.Text, c.field, c.rule)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "ok.md")); err != nil {
		t.Fatal(err)
	}
}
