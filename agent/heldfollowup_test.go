package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// The requester writes while the model is being called, and the step
// ends with an action held for an operator: as for a message that comes
// once the action waits, the job goes on with the message and the held
// action is withdrawn (denied, never run), rather than waiting for an
// operator who may approve what the requester no longer wants.
func TestMessageDuringTheStepWithdrawsTheHeldAction(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		gone := filepath.Join(r.dir, "gone.md")
		if err := os.WriteFile(gone, []byte("bye\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		task := r.send(t, "delete gone.md")
		sendErr := make(chan error, 1)
		m := &duringNth{n: 1, scripted: scripted{answers: []string{
			proposalJSON("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"}),
			proposalJSON("FINISH", map[string]any{"response": "kept it"}),
		}}, during: func() { sendErr <- r.followUp(ctx, task.ID, "never mind, keep it") }}
		got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if err := <-sendErr; err != nil {
			t.Fatalf("the follow-up: %v", err)
		}
		if got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q; want the job gone on with the message and completed", got.Status.State, got.Status.Message)
		}
		if _, err := os.Stat(gone); err != nil {
			t.Fatalf("the withdrawn delete ran: %v", err)
		}
		if held, err := r.exec.Pending(ctx, task.ID); err != nil || len(held) != 0 {
			t.Fatalf("still held: %+v %v", held, err)
		}
		for _, a := range got.Artifacts {
			if strings.HasPrefix(a.ArtifactID, "pending-") && !strings.HasSuffix(a.Name, ", withdrawn") {
				t.Errorf("the withdrawn delete's changes are shown as %q", a.Name)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.prompts) != 2 {
			t.Fatalf("%d model calls; want 2", len(m.prompts))
		}
		second := m.promptText(1)
		if !strings.Contains(second, "never mind, keep it") || !strings.Contains(second, "was withdrawn when the requester wrote again") {
			t.Fatalf("the second call was not told the message and the withdrawal: %s", second)
		}
		h, err := r.store.History(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o := h.Interactions[0].Observation; o == nil || o.Outcome != agent.ObsDenied {
			t.Fatalf("the held step's outcome: %+v; want denied", o)
		}
	})
}

// The same for a step that answers STUCK while the requester writes: the
// job goes on with the message, rather than waiting for guidance it was
// given already.
func TestMessageDuringAStuckStepIsTold(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		task := r.send(t, "write a report")
		sendErr := make(chan error, 1)
		m := &duringNth{n: 1, scripted: scripted{answers: []string{
			`{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"On which file?"}`,
			proposalJSON("FINISH", map[string]any{"response": "done"}),
		}}, during: func() { sendErr <- r.followUp(ctx, task.ID, "use notes.md") }}
		got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if err := <-sendErr; err != nil {
			t.Fatalf("the follow-up: %v", err)
		}
		if got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q; want the job gone on with the message and completed", got.Status.State, got.Status.Message)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		second := m.promptText(len(m.prompts) - 1)
		if len(m.prompts) != 2 || !strings.Contains(second, "use notes.md") {
			t.Fatalf("%d calls; the last was not told the message: %s", len(m.prompts), second)
		}
		h, err := r.store.History(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Fatalf("replay: %v", err)
		}
	})
}

// duringNth is a scripted model that runs during before its nth call
// (from 1) answers: the requester writing while the model is called.
type duringNth struct {
	scripted
	n      int32
	calls  atomic.Int32
	during func()
}

func (m *duringNth) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	if m.calls.Add(1) == m.n {
		m.during()
	}
	return m.scripted.Complete(ctx, p)
}

// The requester writes during the step after which the job's stuck check
// finds it stuck (THINK after identical THINK): the model is told the
// message before the job waits for a human, and once told, the check that
// fires again makes the job wait, with no further call: a job that stays
// stuck does not spin on the message.
func TestMessageBeforeTheStuckCheckIsTold(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		task := r.send(t, "write a report")
		sendErr := make(chan error, 1)
		think := proposalJSON("THINK", map[string]any{})
		m := &duringNth{n: 3, scripted: scripted{answers: []string{think, think, think, think}}, during: func() { sendErr <- r.followUp(ctx, task.ID, "use notes.md") }}
		got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if err := <-sendErr; err != nil {
			t.Fatalf("the follow-up: %v", err)
		}
		if got.Status.State != tasks.StateInputRequired || !strings.HasPrefix(got.Status.Message, "stuck (") {
			t.Fatalf("task %s %q; want it waiting, stuck", got.Status.State, got.Status.Message)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		last := m.promptText(len(m.prompts) - 1)
		if len(m.prompts) != 4 || !strings.Contains(last, "use notes.md") {
			t.Fatalf("%d calls; want 4, the last told the message: %s", len(m.prompts), last)
		}
		j, err := r.store.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != agent.InterventionRequired || j.PendingInput != "" {
			t.Fatalf("job %s, pending %q; want it waiting, told everything", j.Status, j.PendingInput)
		}
	})
}

// followUp sends text as alice's next message on task taskID.
func (r *rig) followUp(ctx context.Context, taskID, text string) error {
	payload, err := json.Marshal(map[string]any{"taskId": taskID, "message": map[string]any{"messageId": uuid.NewString(),
		"role": "user", "parts": []any{map[string]any{"text": text}}}})
	if err != nil {
		return err
	}
	_, err = taskstest.Send(ctx, r.svc, "alice", payload)
	return err
}

// promptText is the text of the messages of m's call i (from 0); m.mu
// is held.
func (m *scripted) promptText(i int) string {
	var b strings.Builder
	for _, msg := range m.prompts[i] {
		b.WriteString(msg.Content)
	}
	return b.String()
}
