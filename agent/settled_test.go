package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A job's held action decided by an operator: the task's artifact of the
// changes held, "changes awaiting confirmation of action …", says under
// the same id what became of them (applied, with the diff; denied), and
// a denied delete leaves no artifact of changes made. Before, the task
// went on showing them awaiting confirmation.
func TestDecidedChangesOfAJob(t *testing.T) {
	eachDecision(t, func(t *testing.T, r *rig, task *tasks.Task, approve bool, diff string) {
		got, err := r.svc.Task(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkSettled(t, got, map[bool]string{true: ", applied", false: ", denied"}[approve], approve, diff)
	})
}

// eachDecision runs check in a subtest for each of an operator's
// decisions, "approve" and "deny", on a job's held delete (heldDelete),
// once the runtime was told of it, with the diff that was held.
func eachDecision(t *testing.T, check func(t *testing.T, r *rig, task *tasks.Task, approve bool, diff string)) {
	t.Helper()
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approve", false: "deny"}[approve], func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			ctx := context.Background()
			task, action := heldDelete(t, r)
			held, err := r.exec.Pending(ctx, task.ID)
			if err != nil || len(held) != 1 {
				t.Fatalf("held: %+v %v", held, err)
			}
			var res *executor.Result
			if approve {
				res, err = r.exec.Approve(ctx, action, executor.Host)
			} else {
				res, err = r.exec.Deny(ctx, action, executor.Host, "not today")
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decider(t, r, nil).Decided(ctx, task.ID, res, approve, held[0].Diff); err != nil {
				t.Fatalf("Decided: %v", err)
			}
			check(t, r, task, approve, held[0].Diff)
		})
	}
}

// checkSettled fails t unless task has one artifact of held changes
// (its id starts with "pending-"), named with end, whose last part is
// the diff held when withDiff, and no artifact of changes made unless
// withDiff.
func checkSettled(t *testing.T, task *tasks.Task, end string, withDiff bool, diff string) {
	t.Helper()
	n := 0
	for _, a := range task.Artifacts {
		if strings.Contains(a.Name, "awaiting confirmation") {
			t.Errorf("the task still shows %q", a.Name)
		}
		if !withDiff && strings.HasPrefix(a.Name, "changes made by") {
			t.Errorf("changes not made are shown as %q", a.Name)
		}
		if !strings.HasPrefix(a.ArtifactID, "pending-") {
			continue
		}
		n++
		if !strings.HasSuffix(a.Name, end) {
			t.Errorf("the held changes are named %q; want it to end %q", a.Name, end)
		}
		last := a.Parts[len(a.Parts)-1]
		if kept := last.Text != nil && *last.Text == diff; kept != withDiff {
			t.Errorf("the diff kept: %v; want %v", kept, withDiff)
		}
	}
	if n != 1 {
		t.Errorf("%d artifacts of held changes; want 1: %+v", n, task.Artifacts)
	}
}
