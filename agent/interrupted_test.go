package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// interrupted stores, for the task of a new rig, the job as a node that
// stopped between the model's answer (raw, as stored) and its outcome left
// it: the answer, no observation, the job running under a lapsed lease.
func (r *rig) interrupted(t *testing.T, raw string, redacted bool) *tasks.Task {
	t.Helper()
	ctx := context.Background()
	task := r.send(t, "write a.md")
	if _, err := r.svc.Transition(ctx, task.ID, tasks.StateWorking, "working"); err != nil {
		t.Fatal(err)
	}
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	it := &agent.Interaction{Sequence: 0, Timestamp: at, StateBefore: agent.Running,
		Request: agent.Request{Messages: []agent.ChatMessage{{Role: "user", Content: "write a.md"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work"}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", RawResponse: raw,
			Redacted: redacted, NewStatus: agent.Running}}
	j.Status, j.NextSeq, j.Steps, j.LeaseUntil = agent.Running, 1, 1, at
	if err := r.store.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
	return task
}

// A stored answer whose redaction left it no longer parseable (an
// operator's pattern that runs past a JSON string) is still finished from
// the executor's record: an action that ran is reported, not run again,
// and one that did not is not run from the redacted text. Either way the
// job goes on.
func TestInterruptedRedactedUnparseable(t *testing.T) {
	pattern := regexp.MustCompile(`password=\S+`)
	for _, tc := range []struct {
		name string
		ran  bool
		want string // a.md afterwards, "" for absent
		obs  string
	}{
		{name: "the action had run", ran: true, want: "password=hunter2", obs: agent.ObsCompleted},
		{name: "the action had not run", ran: false, want: "", obs: agent.ObsNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			ctx := context.Background()
			write := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "password=hunter2"})
			stored := pattern.ReplaceAllString(write, "[REDACTED]")
			if _, aerr := agent.ParseAnswer(stored, 64<<10); aerr == nil {
				t.Fatalf("the redacted answer still parses: %s", stored)
			}
			task := r.interrupted(t, stored, true)
			if tc.ran {
				if res, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(write)}); err != nil || res.Outcome != executor.Completed {
					t.Fatalf("run: %+v %v", res, err)
				}
			}
			m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
			got := r.runWith(t, func(c *agent.Config) { c.Redact = []*regexp.Regexp{pattern} }, m, task.ID,
				tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			acts, err := r.exec.Actions(ctx, task.ID)
			if err != nil || (tc.ran && len(acts) != 1) || (!tc.ran && len(acts) != 0) {
				t.Fatalf("records: %+v %v", acts, err)
			}
			b, err := os.ReadFile(filepath.Join(r.dir, "a.md"))
			if string(b) != tc.want || (tc.want == "" && !os.IsNotExist(err)) {
				t.Fatalf("a.md = %q (%v), want %q", b, err, tc.want)
			}
			h, err := r.store.History(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if o := h.Interactions[0].Observation; o == nil || o.Outcome != tc.obs {
				t.Fatalf("interaction 0's observation: %+v, want %s", o, tc.obs)
			}
			if strings.Contains(h.Interactions[0].Response.RawResponse, "hunter2") {
				t.Fatal("the secret is in the history")
			}
		})
	}
}
