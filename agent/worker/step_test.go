package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/executor/audit"
)

// reasoning is the reasoning of a completion's proposal, and whether the
// completion still carries a step member (which the node strips).
func reasoning(t *testing.T, c *agent.Completion) (string, bool) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(c.Text), &m); err != nil {
		t.Fatalf("completion %q: %v", c.Text, err)
	}
	_, has := m["step"]
	r, _ := m["reasoning"].(string)
	return r, has
}

// A worker that writes its answer to a step twice, the copy arriving
// while the node waits for the next step's answer, must not have the copy
// taken as that answer: the node would run what the worker proposed for
// another state of the workspace. A worker that names the step of each
// answer has the copy skipped, counted and never run. Before, every line
// was the answer to the step the node waited for, and step 1 ran the
// proposal of step 0.
func TestStaleAnswerSkipped(t *testing.T) {
	p, al, _ := pool(t, "twice.py", func(c *worker.Config) { c.Env = append(c.Env, "STEPPED=1") })
	for step := range 4 {
		obs := ""
		if step > 0 {
			obs = `{"outcome":"completed"}`
		}
		c, err := p.Complete(context.Background(), prompt("job-1", step, obs))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		r, has := reasoning(t, c)
		if want := "answer to step " + strconv.Itoa(step); r != want {
			t.Fatalf("step %d took %q; want %q", step, r, want)
		}
		if has {
			t.Errorf("step %d: the completion keeps the worker's step member: %s", step, c.Text)
		}
		// The step's history tells the line skipped during it.
		var want []int
		if step > 0 {
			want = []int{step - 1}
		}
		if !slices.Equal(c.LateLines, want) {
			t.Errorf("step %d: LateLines = %v; want %v (the late copy of the last answer)", step, c.LateLines, want)
		}
	}
	if got := p.StaleLines(); got != 3 {
		t.Errorf("StaleLines = %d; want 3 (one late copy a step after the first)", got)
	}
	if es := al.Entries(); len(es) != 0 {
		t.Errorf("audit: %+v; want nothing (a skipped line is no violation)", es)
	}
}

// The job request a worker gets names the step it answers: past 0 when
// the job went on before the worker started, so that its first answer can
// name it.
func TestRequestNamesStep(t *testing.T) {
	p, _, _ := pool(t, "env.py", nil)
	c, err := p.Complete(context.Background(), prompt("job-3", 3, `{"outcome":"completed"}`))
	if err != nil {
		t.Fatal(err)
	}
	var resp agent.AgentResponse
	if err := json.Unmarshal([]byte(c.Text), &resp); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Msg map[string]any `json:"msg"`
	}
	if err := json.Unmarshal([]byte(resp.SummaryForSupervisor), &s); err != nil {
		t.Fatalf("summary %q: %v", resp.SummaryForSupervisor, err)
	}
	if s.Msg["step"] != float64(3) || s.Msg["task_description"] == nil {
		t.Fatalf("the job request: %v; want step 3", s.Msg)
	}
}

// Answers that break the step rule stop the worker, the error naming the
// field and the rule: a step not asked yet, no step from a worker that
// named its steps before, and more late lines than are skipped.
func TestStepViolations(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		step int // the step of the violation
		rule string
		want string
	}{
		{"future", []string{"STEPPED=1", "STEP_SHIFT=1"}, 0, "step",
			"the worker's answer names step 1 at /step; want the step of the line it answers, 0"},
		{"dropped", []string{"STEPPED=1", "DROP_STEP=1"}, 1, "step",
			"the worker's answer names no step at /step after its earlier answers named theirs"},
		{"named twice", []string{"STEPPED=1", "STEP_TWICE=1"}, 1, "step",
			"the worker wrote garbage: at /step: the step is named twice"},
		// Garbage is refused as such, not for its missing step.
		{"garbage", []string{"STEPPED=1", "GARBAGE_AT=1"}, 1, "object",
			"the worker wrote garbage: the answer is not a single JSON object"},
		{"stale", []string{"STEPPED=1", "STALE=20"}, 1, "stale",
			"the worker wrote more than 8 lines for past steps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, al, pidfile := pool(t, "twice.py", func(cfg *worker.Config) { cfg.Env = append(cfg.Env, c.env...) })
			var err error
			for step := 0; step <= c.step; step++ {
				obs := ""
				if step > 0 {
					obs = `{"outcome":"completed"}`
				}
				_, err = p.Complete(context.Background(), prompt("job-1", step, obs))
				if step < c.step && err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "("+c.rule+")") {
				t.Fatalf("err = %v; want agent.ErrWorkerFailed with %q (%s)", err, c.want, c.rule)
			}
			gone(t, pids(t, pidfile))
			es := al.Entries()
			if len(es) != 1 || es[0].Step != audit.StepRejected || !strings.Contains(string(es[0].Detail), `"rule":"`+c.rule+`"`) {
				t.Fatalf("audit: %+v", es)
			}
		})
	}
}

// A worker that names no step keeps working as before: its one line a
// step is the answer.
func TestUnsteppedAnswers(t *testing.T) {
	p, _, _ := pool(t, "env.py", nil)
	for step := range 3 {
		obs := ""
		if step > 0 {
			obs = `{"outcome":"completed"}`
		}
		if _, err := p.Complete(context.Background(), prompt("job-1", step, obs)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if p.StaleLines() != 0 {
		t.Errorf("StaleLines = %d", p.StaleLines())
	}
}
