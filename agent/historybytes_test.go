package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// TestHistoryBytesPerStep: the history stores what each step adds (the
// model's answer, the observation, the messages new to the call), not the
// system prompt and the task again at every step: the bytes a step adds
// do not grow with the job. What the history shows is still the exact
// messages of every call, and a stored copy altered in any message is
// refused naming the interaction.
func TestHistoryBytesPerStep(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		job := func(steps int) (string, *scripted) {
			m := &scripted{}
			for i := range steps - 1 {
				m.answers = append(m.answers, proposalJSON("WRITE_FILE", map[string]any{
					"path": fmt.Sprintf("/sandbox/f%d-%d.md", steps, i), "content": fmt.Sprintf("step %d\n", i)}))
			}
			m.answers = append(m.answers, proposalJSON("FINISH", map[string]any{"response": "done"}))
			task, err := taskstest.Send(ctx, r.svc, "alice", []byte(`{"message":{"messageId":"m`+fmt.Sprint(steps)+
				`","role":"user","parts":[{"text":"write the files"}]}}`))
			if err != nil {
				t.Fatal(err)
			}
			r.run(t, m, task.ID, tasks.StateCompleted)
			return task.ID, m
		}
		bytes := func(id string) int64 {
			j, err := r.store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return j.HistoryBytes
		}
		short, _ := job(4)
		long, m := job(16)
		perStep := float64(bytes(long)-bytes(short)) / 12
		// A step here adds an answer and an observation of a few hundred
		// bytes each, with their metadata; the system prompt alone is
		// several kilobytes.
		if perStep > 2500 {
			t.Errorf("the history grows by %.0f bytes a step, want what the step adds (≤ 2500)", perStep)
		}
		t.Logf("history: %d bytes for 4 steps, %d for 16: %.0f bytes a step", bytes(short), bytes(long), perStep)

		h, err := r.store.History(ctx, long)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Interactions) != len(m.prompts) {
			t.Fatalf("%d interactions for %d calls", len(h.Interactions), len(m.prompts))
		}
		for i, it := range h.Interactions {
			if fmt.Sprint(it.Request.Messages) != fmt.Sprint(m.prompts[i]) {
				t.Fatalf("interaction %d: the history shows other messages than the call sent", i)
			}
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Fatal(err)
		}

		// Alter one word of the system prompt, stored once, in the first
		// interaction: every later request is built on it.
		err = r.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var body string
			if err := tx.QueryRowContext(ctx, r.db.Dialect.Rebind(`SELECT body FROM agent_interactions WHERE task_id = ? AND seq = 0`), long).Scan(&body); err != nil {
				return err
			}
			var it map[string]any
			if err := json.Unmarshal([]byte(body), &it); err != nil {
				return err
			}
			system := it["request"].(map[string]any)["messages"].([]any)[0].(map[string]any)
			system["content"] = strings.Replace(system["content"].(string), "sandbox", "sandbax", 1)
			altered, err := json.Marshal(it)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, r.db.Dialect.Rebind(`UPDATE agent_interactions SET body = ? WHERE task_id = ? AND seq = 0`),
				string(altered), long)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.History(ctx, long); !errors.Is(err, agent.ErrHistoryMismatch) || !strings.Contains(err.Error(), "interaction 0") {
			t.Fatalf("History of an altered copy = %v, want ErrHistoryMismatch naming interaction 0", err)
		}
	})
}
