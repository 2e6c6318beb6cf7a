package proposals_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

// Once an operator decides on a held action, the task's artifact of the
// changes held ("changes awaiting confirmation of action …") says what
// became of them, under the same id, both in the task and in the events
// a streaming peer receives; the task has no artifact of changes made
// when they were denied. In the memory store, where the decision's
// outcome is applied after the executor's commit, and in SQLite, where it
// is written in that commit.
func TestDecisionSettlesTheHeldChanges(t *testing.T) {
	for _, store := range []string{"memory", "sqlite"} {
		for _, approve := range []bool{true, false} {
			t.Run(store+"/"+map[bool]string{true: "approve", false: "deny"}[approve], func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "sandbox")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				r := newReplicaWith(t, testdb.SQLite(t), false, dir, store == "memory")
				task, pa := r.oneHeld(t)
				var pending tasks.Artifact
				for _, a := range task.Artifacts {
					if strings.HasPrefix(a.ArtifactID, "pending-") {
						pending = a
					}
				}
				if !strings.HasPrefix(pending.Name, "changes awaiting confirmation") {
					t.Fatalf("held task's artifacts: %+v", task.Artifacts)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, events, err := r.svc.Subscribe(ctx, alice, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: pa.ActionID, Approver: executor.Host, Approve: approve})
				if err != nil {
					t.Fatal(err)
				}
				end := map[bool]string{true: ", applied", false: ", denied"}[approve]
				check := func(what string, arts []tasks.Artifact) {
					t.Helper()
					n := 0
					for _, a := range arts {
						if a.ArtifactID == pending.ArtifactID {
							n++
							if !strings.HasSuffix(a.Name, end) {
								t.Errorf("%s: the held changes are %q; want a name ending %q", what, a.Name, end)
							}
							last := a.Parts[len(a.Parts)-1]
							if kept := last.Text != nil && *last.Text == pa.Diff; kept != approve {
								t.Errorf("%s: the diff kept: %v; want %v", what, kept, approve)
							}
						}
						if strings.HasPrefix(a.Name, "changes made by") && !approve {
							t.Errorf("%s: a denied task has %q", what, a.Name)
						}
					}
					if n != 1 {
						t.Errorf("%s: %d artifacts %s; want 1", what, n, pending.ArtifactID)
					}
				}
				check("the decision's answer", got.Artifacts)
				now, err := r.svc.Task(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				check("the task read again", now.Artifacts)
				var streamed []tasks.Artifact
				for ev := range events {
					if ev.Artifact != nil {
						streamed = append(streamed, *ev.Artifact)
					}
				}
				if ctx.Err() != nil {
					t.Fatal("the stream did not end with the task")
				}
				check("the stream's artifact events", streamed)
			})
		}
	}
}
