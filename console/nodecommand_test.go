package console_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/proposals"
)

// everyHint is fakeSource with a task whose page has every hint that
// names a command: more held actions than it shows, each with a diff
// longer than it shows, more steps than it shows, a step's texts longer
// than they are shown, and more audit entries than it shows.
type everyHint struct{ fakeSource }

func (everyHint) Held(_ context.Context, taskID string) ([]executor.Pending, error) {
	var out []executor.Pending
	for i := range console.MaxHeld + 1 {
		out = append(out, executor.Pending{ActionID: fmt.Sprintf("act-%d", i), TaskID: taskID, Requester: "bc1palice",
			Action: "WRITE_FILE", Data: []byte(`{"action_type":"WRITE_FILE"}`), Diff: strings.Repeat("+x\n", console.MaxDiffText), Created: t0})
	}
	return out, nil
}

func (s everyHint) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	list, err := s.Held(ctx, q.Task)
	return heldPage(list, q), err
}

func (s everyHint) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, its, err := s.fakeSource.Job(ctx, taskID, limit)
	long := strings.Repeat("y", console.MaxStepText+1)
	for i := range console.MaxSteps {
		its = append(its, agent.Interaction{Sequence: 2 + i, Timestamp: t0, Guidance: long,
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK", Reasoning: strings.Repeat("r", agent.MaxReasoningBytes+1), SummaryForSupervisor: long},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, Reason: long, Diff: long}})
	}
	return j, its, err
}

func (everyHint) Audit(_ context.Context, f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	for i := range console.MaxAuditEntries {
		out = append(out, audit.Entry{Seq: int64(100 + i), Time: t0, Actor: "bc1palice", Task: "t1", Action: "act-0", Step: audit.StepHeld})
	}
	return out, nil
}

func (everyHint) AuditCount(context.Context, audit.Filter) (int64, error) { return 99, nil }

// snapnodeCommand is a command a page names: up to the end of its code
// element, or the words that follow the command's name.
var snapnodeCommand = regexp.MustCompile(`snapnode (held|job history|job list|audit export|console-url)( [^ <.)]+)*`)

// Every command a console page names for an operator to run names this
// node as it was started (Config.NodeFlags): run as printed, a bare
// command finds no node of another data folder (or another database).
// Before, the page named snapnode held ID, held --diff ID, job history
// and audit export bare.
func TestHintsNameTheNode(t *testing.T) {
	const flags = "--data-dir '/srv/my node'"
	r := newRig(t, func(c *console.Config) {
		c.Source = everyHint{fakeSource{dec: nil}}
		c.NodeFlags = flags
	})
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	body := strings.ReplaceAll(w.Body.String(), "&#39;", "'")
	want := map[string]string{
		"held":         "snapnode held " + flags + " t1",
		"held --diff":  "snapnode held " + flags + " --diff t1",
		"job history":  "snapnode job history " + flags + " t1",
		"audit export": "snapnode audit export " + flags,
	}
	for what, cmd := range want {
		if !strings.Contains(body, cmd) {
			t.Errorf("the page does not name %s as %q", what, cmd)
		}
	}
	seen := map[string]bool{}
	for _, m := range snapnodeCommand.FindAllString(body, -1) {
		if !strings.Contains(m, flags) && !seen[m] {
			seen[m] = true
			t.Errorf("the page names %q, without the node's %s", m, flags)
		}
	}
	if w := r.do("GET", "/console/", nil, nil, nil); !strings.Contains(strings.ReplaceAll(w.Body.String(), "&#39;", "'"), "run: snapnode console-url "+flags+" — ") {
		t.Errorf("the login hint does not name the node: %s", w.Body)
	}
}
