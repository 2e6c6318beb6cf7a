package agent_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A requester's follow-up to a job at work is stored in the job's row (its
// pending input) until the model's next call, and for good when the job
// ends first; a new task's text is stored as the job's description before
// the job starts. Both go through the runtime's redaction: the built-in
// patterns, the API key and the operator's agent.redact. Before, the queue
// removed only the built-in patterns, and the row kept the operator's
// secrets and the API key.
func TestFollowUpRedactedWhenQueued(t *testing.T) {
	n := newRig(t, testdb.SQLite(t))
	m := &fuModel{first: make(chan struct{}), release: make(chan struct{})}
	const apiKey = "model-server-key-0123456789"
	cfg := agent.Config{ContextTokens: 8000, Secrets: []string{apiKey},
		Redact: []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}}
	task := fuStart(t, n, m, cfg, "write a report with corp-token-FIRST42")
	fuSend(t, n, task.ID, "and use corp-token-SECRET42 and "+apiKey+" and sk-abcdefghijklmnopqrstuvwxyz")
	j, err := n.store.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SECRET42", apiKey, "sk-abc"} {
		if strings.Contains(j.PendingInput, s) {
			t.Errorf("the job's row keeps %q in its pending input: %q", s, j.PendingInput)
		}
	}
	if !strings.Contains(j.PendingInput, "and use [REDACTED] and [REDACTED] and [REDACTED]") {
		t.Errorf("pending input %q; want the follow-up, redacted", j.PendingInput)
	}
	if strings.Contains(j.Description, "FIRST42") {
		t.Errorf("the job's description keeps the secret: %q", j.Description)
	}
	fuFinish(t, n, m, task.ID)
}

// A new task's job is stored, with its description, when the task is
// taken, before a runtime slot starts it: the description is redacted as
// everything else the runtime stores.
func TestPendingDescriptionRedacted(t *testing.T) {
	n := newRig(t, testdb.SQLite(t))
	if _, err := agent.New(agent.Config{Queue: n.queue, Store: n.store, Tasks: n.svc, Executor: n.exec,
		Model: &fuModel{}, Redact: []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}}); err != nil {
		t.Fatal(err)
	}
	task := fuSend(t, n, "", "write a report with corp-token-FIRST42")
	j, err := n.store.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != agent.Pending || j.Description != "write a report with [REDACTED]" {
		t.Fatalf("job %s with description %q; want pending, its secret redacted", j.Status, j.Description)
	}
}
