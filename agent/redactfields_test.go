package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// What the runtime keeps of an answer beside its text is redacted as its
// text is: a secret the model writes as a proposal's action, or as the
// name of an evidence file that does not exist, reaches neither the
// history, nor the task, and the history replays. Before, the stored
// answer was redacted but the action recorded beside it and the step's
// note on the task kept the secret, the missing evidence files were named
// whole in the observation, and replay found the recorded action unlike
// the stored answer's.
func TestSecretInAnswerFieldsRedacted(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "go")
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	m := &scripted{answers: []string{
		`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"` + secret + `","args":{"path":"/sandbox/a.md"}}`,
		`{"action":"COMPLETED","evidence_files":["/sandbox/` + secret + `.md"],"summary_for_supervisor":"done"}`,
	}}
	got := r.run(t, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the history holds the secret: %s", b)
	}
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Errorf("replay: %v", err)
	}
	evs, err := r.svc.TaskEvents(ctx, "alice", task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the task's events hold the secret: %s", b)
	}
	if b, _ = json.Marshal(got); strings.Contains(string(b), secret) {
		t.Errorf("the task holds the secret: %s", b)
	}
}
