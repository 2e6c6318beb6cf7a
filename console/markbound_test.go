package console_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/proposals"
)

// lookAlikeFloodSource is fakeSource whose job's steps and audit trail
// carry texts at their bounds made wholly of look-alike letters: each
// Cyrillic а (2 bytes) is shown as ⟨U+0430 Cyrillic⟩ (21 bytes).
type lookAlikeFloodSource struct {
	fakeSource
	steps int
}

// lookAlikes is n bytes of Cyrillic а, one word that reads as Latin.
func lookAlikes(n int) string { return strings.Repeat("\u0430", n/2) }

func (s lookAlikeFloodSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, _, err := s.fakeSource.Job(ctx, taskID, limit)
	var its []agent.Interaction
	for i := range s.steps {
		its = append(its, agent.Interaction{Sequence: i, Timestamp: t0,
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", Reasoning: lookAlikes(agent.MaxReasoningBytes)},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, Reason: lookAlikes(console.MaxStepText)}})
	}
	return j, its, err
}

func (s lookAlikeFloodSource) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	es, err := s.fakeSource.Audit(ctx, f)
	for i := range es {
		es[i].Reason = lookAlikes(audit.MaxReasonLength)
	}
	return es, err
}

var (
	outcomeRE = regexp.MustCompile(`(?s)<p>Outcome: <strong>[^<]*</strong> — (.*?)</p>`)
	reasonRE  = regexp.MustCompile(`(?s)<td class="msg">(.*?)</td>`)
	thinkRE   = regexp.MustCompile(`(?s)<pre class="msg">(.*?)</pre>`)
	aRE       = regexp.MustCompile(`⟨U\+0430 Cyrillic⟩`)
)

// TestMarkedTextsBounded: a text the console cuts at its bound is still
// within it once its look-alike letters are spelled out, give or take the
// line that says what was left out. They were cut, then marked: a step's
// reason of 4 KiB of Cyrillic а was shown in 40 KiB, its reasoning of
// 8 KiB in 80 KiB, an audit entry's reason in 40 KiB; 200 such steps made
// a page of 24 MiB where the console documents 4 KiB a text.
func TestMarkedTextsBounded(t *testing.T) {
	src := lookAlikeFloodSource{steps: 5}
	r := newRig(t, func(c *console.Config) { c.Source = src })
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	if w.Code != 200 {
		t.Fatalf("task page: %d\n%s", w.Code, w.Body)
	}
	body := w.Body.String()
	const slack = 128 // the line that says what was left out
	check := func(what string, shown string, bound int) {
		t.Helper()
		shown = html.UnescapeString(shown)
		if len(shown) > bound+slack || !strings.Contains(shown, "more bytes not shown") {
			t.Errorf("%s is shown in %d bytes (at most %d and a line), cut %v", what, len(shown), bound, strings.Contains(shown, "not shown"))
		}
		if rest := strings.TrimRight(aRE.ReplaceAllString(shown, ""), "\n"); !strings.HasPrefix(rest, "\n… (") {
			t.Errorf("%s: a marker cut short or a letter shown unmarked: %.80q", what, rest)
		}
	}
	var outcomes, reasonings, reasons int
	for _, m := range outcomeRE.FindAllStringSubmatch(body, -1) {
		outcomes++
		check("a step's reason", m[1], console.MaxStepText)
	}
	for _, m := range thinkRE.FindAllStringSubmatch(body, -1) {
		reasonings++
		check("a step's reasoning", m[1], agent.MaxReasoningBytes)
	}
	for _, m := range reasonRE.FindAllStringSubmatch(body, -1) {
		reasons++
		check("an audit entry's reason", m[1], audit.MaxReasonLength)
	}
	if outcomes != src.steps || reasonings != src.steps || reasons == 0 {
		t.Errorf("the page shows %d step reasons, %d reasonings and %d audit reasons, want %d, %d and some", outcomes, reasonings, reasons, src.steps, src.steps)
	}
}

// lookAlikeDiff is a diff of n bytes or more whose file headers name
// paths of Cyrillic а, which the page spells out.
func lookAlikeDiff(n int) string {
	var b strings.Builder
	for b.Len() < n {
		p := "/sandbox/" + lookAlikes(1000)
		b.WriteString("--- " + p + "\n+++ " + p + "\n@@ -1 +1 @@\n-a\n+b\n")
	}
	return b.String()
}

// lookAlikeDiffSource holds an action, and has a step, whose diffs are
// at their bounds, their file headers of look-alikes.
type lookAlikeDiffSource struct{ fakeSource }

func (s lookAlikeDiffSource) Held(ctx context.Context, taskID string) ([]executor.Pending, error) {
	list, err := s.fakeSource.Held(ctx, taskID)
	for i := range list {
		list[i].Diff = lookAlikeDiff(console.MaxDiffText)
	}
	return list, err
}

func (s lookAlikeDiffSource) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	list, err := s.Held(ctx, q.Task)
	return heldPage(list, q), err
}

func (s lookAlikeDiffSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, its, err := s.fakeSource.Job(ctx, taskID, limit)
	for i := range its {
		if its[i].Observation != nil {
			its[i].Observation.Diff = lookAlikeDiff(console.MaxStepText)
		}
	}
	return j, its, err
}

// TestMarkedDiffsBounded: a diff is shown within its bound once the
// look-alike letters of its paths are spelled out; what is cut says so,
// and no marker is cut short. The held action's diff was cut at
// MaxDiffText, then its headers marked: ten times that on the page.
func TestMarkedDiffsBounded(t *testing.T) {
	r := newRig(t, func(c *console.Config) { c.Source = lookAlikeDiffSource{} })
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	if w.Code != 200 {
		t.Fatalf("task page: %d\n%s", w.Code, w.Body)
	}
	const slack = 160 // the line that says what was left out
	var held, steps int
	for _, m := range regexp.MustCompile(`(?s)<pre class="diff">(.*?)</pre>`).FindAllStringSubmatch(w.Body.String(), -1) {
		shown := html.UnescapeString(m[1])
		if !strings.HasPrefix(shown, "--- /sandbox/⟨U+0430") {
			continue
		}
		bound := console.MaxStepText
		if strings.Contains(shown, "download it whole") {
			held++
			bound = console.MaxDiffText
		} else {
			steps++
		}
		if len(shown) > bound+slack || !strings.Contains(shown, "more bytes of the diff not shown") {
			t.Errorf("a diff is shown in %d bytes (at most %d and a line), cut %v", len(shown), bound, strings.Contains(shown, "not shown"))
		}
		if rest := aRE.ReplaceAllString(shown, ""); strings.Contains(rest, "\u0430") || strings.Contains(rest, "⟨") {
			t.Errorf("a diff shows a marker cut short or a letter unmarked")
		}
	}
	if held == 0 || steps == 0 {
		t.Errorf("the page shows %d held diffs and %d step diffs of look-alike paths, want some of each", held, steps)
	}
}
