package agent_test

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A failed model call's error may carry what the other side said (a
// model server's error body, a delegate's HTTP error): the lines that log
// it, the retry's and the refusal's, hold its secrets redacted, by the
// built-in patterns and the operator's, as the job's history does.
func TestModelCallErrorLoggedRedacted(t *testing.T) {
	const said = "upstream refused sk-live-ABCDEF0123456789abcdef and corp-token-SECRETVALUE42"
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(503, said), llmtest.Error(401, said))
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	task := r.send(t, "go")
	got := r.runWith(t, func(cfg *agent.Config) {
		cfg.Backoff, cfg.Logger = time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil))
		cfg.Redact = []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}
	}, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired || srv.Calls() != 2 {
		t.Fatalf("task %s %q after %d calls; want input_required after 2", got.Status.State, got.Status.Message, srv.Calls())
	}
	for _, line := range []string{"model call failed; retrying", "the model server refused the request"} {
		var l string
		for s := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(s, `msg="agent: `+line) {
				l = s
			}
		}
		if !strings.Contains(l, "upstream refused") || !strings.Contains(l, "[REDACTED]") ||
			strings.Contains(l, "ABCDEF0123456789") || strings.Contains(l, "SECRETVALUE42") {
			t.Errorf("the line %q: %s; want the error, its secrets [REDACTED]", line, l)
		}
	}
}
