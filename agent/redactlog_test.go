package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/executor"
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

// secretDatabase is an executor whose failure names a secret (a database
// URL with its password, as a driver's error may).
type secretDatabase struct{ agent.Executor }

func (secretDatabase) Run(context.Context, executor.Request) (*executor.Result, error) {
	return nil, errors.New("executor: begin: dial postgres://snap:corp-token-SECRETVALUE42@10.0.0.5/db: refused sk-live-ABCDEF0123456789abcdef")
}

// A job the node cannot go on with logs its error and keeps it in the
// job's reason for the operator, its secrets redacted there too.
func TestNodeFailureLoggedRedacted(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	var logs syncBuffer
	task := readingJob(t, r, 1)
	got := r.runWith(t, func(cfg *agent.Config) {
		cfg.Executor = secretDatabase{cfg.Executor}
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		cfg.Redact = []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}
	}, &mute{}, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	var l string
	for s := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(s, `msg="agent: job failed"`) {
			l = s
		}
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"the log line": l, "the job's reason": j.Reason} {
		if !strings.Contains(s, "10.0.0.5") || !strings.Contains(s, "[REDACTED]") ||
			strings.Contains(s, "ABCDEF0123456789") || strings.Contains(s, "SECRETVALUE42") {
			t.Errorf("%s: %s; want the error, its secrets [REDACTED]", what, s)
		}
	}
}
