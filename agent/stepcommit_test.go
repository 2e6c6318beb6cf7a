package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// commitSpy runs the real executor and reads, inside the transaction of
// each action's last commit, the task's status note as that commit will
// make it durable.
type commitSpy struct {
	*executor.Executor
	r     *rig
	notes []string // by run, the task's note in its last commit ("-" when there was none)
}

func (s *commitSpy) Run(ctx context.Context, req executor.Request) (*executor.Result, error) {
	then, ran := req.Then, false
	req.Then = func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
		ran = true
		if then != nil {
			if err := then(ctx, tx, res); err != nil {
				return err
			}
		}
		var note string
		err := tx.QueryRowContext(ctx, s.r.db.Dialect.Rebind(`SELECT status_message FROM tasks WHERE id = ?`), req.TaskID).Scan(&note)
		s.notes = append(s.notes, note)
		return err
	}
	res, err := s.Executor.Run(ctx, req)
	if !ran {
		s.notes = append(s.notes, "-")
	}
	return res, err
}

// A step that runs an action and goes on writes its note on the task (the
// status event a requester's stream shows) in the executor's last commit
// of the action: the action's record and the step are durable together,
// one commit instead of two. A step that ends the job (FINISH) leaves
// the task to the job's end.
func TestStepNoteInActionCommit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		spy := &commitSpy{Executor: r.exec, r: r}
		r.runExec = spy
		ctx := context.Background()
		payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m1", "role": "user",
			"parts": []any{map[string]any{"text": "write some files"}}}})
		task, err := taskstest.Send(ctx, r.svc, "alice", payload)
		if err != nil {
			t.Fatal(err)
		}
		done := r.run(t, &writer{steps: 3}, task.ID, tasks.StateCompleted)
		if done.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s", done.Status.State)
		}
		// The runtime's own listing of the workspace for the task
		// message, then the model's three proposals.
		if len(spy.notes) != 4 {
			t.Fatalf("%d executor runs, want 4: %q", len(spy.notes), spy.notes)
		}
		for i, want := range []string{"step 1: WRITE_FILE", "step 2: WRITE_FILE"} {
			if got := spy.notes[i+1]; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "→ completed") {
				t.Errorf("in the last commit of action %d the task's note is %q; want the step's, %q… → completed", i+1, got, want)
			}
		}
		if spy.notes[3] != spy.notes[2] {
			t.Errorf("FINISH's commit changed the task's note to %q", spy.notes[3])
		}
		evs, err := r.svc.TaskEvents(ctx, "alice", task.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		steps := 0
		for _, ev := range evs {
			if ev.Status != nil && strings.HasPrefix(ev.Status.Message, "step ") {
				steps++
			}
		}
		if steps != 2 {
			t.Errorf("%d step events recorded, want one per action that went on (2)", steps)
		}
	})
}
