package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A job stored before its task's messages were counted (told = -1, from
// before migration 0008) is told two follow-ups whose Takes race: B's
// Take, its task read with both messages, commits before A's. Both
// reach the job once the count is settled, as the node does at start.
func TestLegacyJobKeepsRacingFollowUps(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		task := r.send(t, "write a report")
		if _, err := r.db.W.ExecContext(ctx, r.db.Dialect.Rebind(`UPDATE agent_jobs SET told = -1 WHERE task_id = ?`), task.ID); err != nil {
			t.Fatal(err)
		}
		// The node starts.
		settleTold(t, r)
		// Two follow-ups are stored; their Takes come in the other order.
		withA, withB := *task, *task
		withA.History = append(slices.Clip(task.History), tasks.Message{Role: "user", Parts: []tasks.Part{tasks.TextPart("FOLLOW-UP-A")}})
		withB.History = append(slices.Clip(withA.History), tasks.Message{Role: "user", Parts: []tasks.Part{tasks.TextPart("FOLLOW-UP-B")}})
		for _, tk := range []*tasks.Task{&withB, &withA} {
			if err := r.queue.Take(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		in, err := r.store.PendingInput(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(in, "FOLLOW-UP-A") || !strings.Contains(in, "FOLLOW-UP-B") {
			t.Fatalf("pending input %q; want both follow-ups", in)
		}
	})
}

// settleTold counts the messages of r's jobs stored before they were
// counted, as the node does at start (Queue.CountTold).
func settleTold(t *testing.T, r *rig) {
	t.Helper()
	if n, err := r.queue.CountTold(context.Background(), r.ts.Get); n != 1 || err != nil {
		t.Fatalf("counted %d jobs: %v; want 1", n, err)
	}
}
