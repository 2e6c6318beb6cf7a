package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/tasks"
)

// lookAlikeReason is the executor's reason for holding a write to a path
// whose "а" is Cyrillic (U+0430), as the task's status message, the held
// entry of the audit log and the outcome of the agent's step carry it.
const lookAlikeReason = "WRITE_FILE on /sandbox/reports/p\u0430ssword.txt; risk MEDIUM; changes 1 path"

// lookAlikeSource is fakeSource whose task, audit log and job name the
// held write's look-alike path in the node's words.
type lookAlikeSource struct{ fakeSource }

func (s lookAlikeSource) task() *tasks.Task {
	t := s.fakeSource.task()
	t.Status.Message = "confirmation needed for action act-1: " + lookAlikeReason
	return t
}

func (s lookAlikeSource) Tasks(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	return []*tasks.Task{s.task()}, nil
}

func (s lookAlikeSource) Task(ctx context.Context, id string) (*tasks.Task, error) {
	if _, err := s.fakeSource.Task(ctx, id); err != nil {
		return nil, err
	}
	return s.task(), nil
}

func (s lookAlikeSource) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	if f.Action == "act-1" && f.Newest && f.Limit == 1 {
		// The action's last entry, as the page after an approval that
		// failed reads it.
		return []audit.Entry{{Seq: 3, Time: t0, Actor: "host", Task: "t1", Action: "act-1", Step: audit.StepFailed, Reason: lookAlikeReason}}, nil
	}
	es, err := s.fakeSource.Audit(ctx, f)
	for i := range es {
		if es[i].Step == audit.StepHeld {
			es[i].Reason = lookAlikeReason
		}
	}
	return es, err
}

func (s lookAlikeSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, its, err := s.fakeSource.Job(ctx, taskID, limit)
	for i := range its {
		if o := its[i].Observation; o != nil && o.Outcome == agent.ObsNeedsConfirmation {
			o.Reason = lookAlikeReason
		}
	}
	return j, its, err
}

// TestLookAlikePathsInTheNodesWords: a path one of whose words can pass
// for a Latin word it is not is marked (its letters beyond ASCII spelled
// out) where the console shows it in the node's words too, not only in
// the held action's box: the task's status message (in the task list
// and on the task page), the audit trail's reason, the agent step's
// outcome and the notice of an approval that failed. They showed "/sandbox/reports/pаssword.txt" as it reads.
func TestLookAlikePathsInTheNodesWords(t *testing.T) {
	r := newRig(t, func(c *console.Config) { c.Source = lookAlikeSource{} })
	ck := r.login(t)
	const shown = "WRITE_FILE on /sandbox/reports/p⟨U&#43;0430 Cyrillic⟩ssword.txt; risk MEDIUM"
	for _, page := range []string{"", "tasks/t1", "audit", "tasks/t1?done=failed&action=act-1"} {
		w := r.do("GET", at(ck, page), nil, ck, nil)
		b := w.Body.String()
		if w.Code != 200 || strings.Contains(b, "p\u0430ssword") || !strings.Contains(b, shown) {
			t.Errorf("page %q: %d, the look-alike path shown as it reads %v, marked %v", page, w.Code, strings.Contains(b, "p\u0430ssword"), strings.Contains(b, shown))
		}
	}
}
