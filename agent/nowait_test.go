package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// TestWriteStepOutcomeNoWait: a write step's promotion is recorded by a
// commit that does not wait for the disk (the job's next commit does),
// one per write; the job's other commits wait, and the job ends with
// every write recorded.
func TestWriteStepOutcomeNoWait(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	counter, ok := any(r.db).(interface{ UnsyncedCommits() int64 })
	if !ok {
		t.Skip("this database cannot commit without waiting for the disk (sqldb.DB.WriteNoSync)")
	}
	ctx := context.Background()
	const writes = 3
	m := &scripted{}
	for i := range writes {
		m.answers = append(m.answers, proposalJSON("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/w%d.md", i), "content": "w\n"}))
	}
	m.answers = append(m.answers, proposalJSON("READ_FILE", map[string]any{"path": "/sandbox/w0.md"}),
		proposalJSON("FINISH", map[string]any{"response": "done"}))
	task := r.send(t, "write")
	before := counter.UnsyncedCommits()
	r.run(t, m, task.ID, tasks.StateCompleted)
	if got := counter.UnsyncedCommits() - before; got != writes {
		t.Errorf("%d commits did not wait for the disk, want one per write (%d)", got, writes)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		if o := h.Interactions[i].Observation; o == nil || o.Outcome != "completed" {
			t.Errorf("write %d: observation %+v", i, o)
		}
	}
}
