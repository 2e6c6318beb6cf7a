package console_test

import (
	"context"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

// controlFloodSource is fakeSource whose texts are at their bounds and
// made wholly of control characters, each shown as a marker of twelve bytes
// (⟨U+0001⟩ for one byte): a different one for each bound, so that a
// test can tell which bound a text shown is held to. Its held action
// changes many long paths of look-alike letters.
type controlFloodSource struct{ fakeSource }

// controls is n bytes of the control character c.
func controls(c byte, n int) string { return strings.Repeat(string(rune(c)), n) }

// The control characters of each bound.
const (
	stepCtl      = 0x01 // MaxStepText: a step's texts, the node's words
	reasoningCtl = 0x02 // agent.MaxReasoningBytes
	partCtl      = 0x03 // MaxPartText: a message's parts
	diffCtl      = 0x04 // MaxDiffText: a held action's diff
	auditCtl     = 0x05 // audit.MaxReasonLength
	manyPaths    = 100
)

func (s controlFloodSource) Task(ctx context.Context, id string) (*tasks.Task, error) {
	t, err := s.fakeSource.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	t.Status.Message = controls(stepCtl, console.MaxStepText)
	t.History = []tasks.Message{{MessageID: "m1", Role: "user", Parts: []tasks.Part{{Text: text(controls(partCtl, console.MaxPartText))}}}}
	t.Artifacts = []tasks.Artifact{{ArtifactID: "a1", Name: "notes", Parts: []tasks.Part{{Text: text(controls(partCtl, console.MaxPartText))}}}}
	return t, nil
}

func (s controlFloodSource) Held(ctx context.Context, taskID string) ([]executor.Pending, error) {
	list, err := s.fakeSource.Held(ctx, taskID)
	for i := range list {
		list[i].Reason = controls(stepCtl, console.MaxStepText)
		// A zero-width space (3 bytes) is shown as ⟨U+200B⟩ (10).
		list[i].Data = []byte(`{"intent_summary":"` + strings.Repeat("\u200B", console.MaxPartText/3) + `"}`)
		list[i].Diff = "--- /dev/null\n+++ /sandbox/a.txt\n@@ -0,0 +1 @@\n+" + controls(diffCtl, console.MaxDiffText) + "\n"
		list[i].PreImages = nil
		for j := range manyPaths {
			list[i].PreImages = append(list[i].PreImages, executor.PreImage{Path: fmt.Sprintf("/sandbox/%s\x01/%d.txt", lookAlikes(2000), j), Kind: sandbox.KindAbsent})
		}
	}
	return list, err
}

func (s controlFloodSource) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	list, err := s.Held(ctx, q.Task)
	return heldPage(list, q), err
}

func (s controlFloodSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, _, err := s.fakeSource.Job(ctx, taskID, limit)
	text := controls(stepCtl, console.MaxStepText)
	j.Reason = text
	its := []agent.Interaction{{Sequence: 0, Timestamp: t0, Guidance: text,
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE",
			SummaryForSupervisor: text, Error: text, Reasoning: controls(reasoningCtl, agent.MaxReasoningBytes)},
		Observation: &agent.Observation{Outcome: agent.ObsNeedsConfirmation, ActionID: "act-1", Reason: text,
			Diff: "--- /dev/null\n+++ /sandbox/b.txt\n@@ -0,0 +1 @@\n+" + text + "\n"}}}
	return j, its, err
}

func (s controlFloodSource) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	es, err := s.fakeSource.Audit(ctx, f)
	for i := range es {
		es[i].Reason = controls(auditCtl, audit.MaxReasonLength)
	}
	return es, err
}

var (
	blockRE = regexp.MustCompile(`(?s)<(pre|p|dd|td)\b[^>]*>(.*?)</(?:pre|p|dd|td)>`)
	filesRE = regexp.MustCompile(`(?s)<ul class="files"[^>]*>(.*?)</ul>`)
	tagRE   = regexp.MustCompile(`<[^>]*>`)
)

// TestVisibleTextsBounded: a text the console shows within a bound is
// within it once its invisible characters are spelled out (⟨U+0001⟩, twelve
// bytes for one), give or take the line that says what was left out,
// and no marker is cut short. They were cut, then spelled out: a step's
// text of 4 KiB of control characters was shown in 48 KiB, a message's
// parts of 16 KiB in 192 KiB, a held action's diff of 64 KiB in 768 KiB.
func TestVisibleTextsBounded(t *testing.T) {
	r := newRig(t, func(c *console.Config) { c.Source = controlFloodSource{} })
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	if w.Code != 200 {
		t.Fatalf("task page: %d\n%s", w.Code, w.Body)
	}
	body := w.Body.String()
	const slack = 256 // the line that says what was left out, the words before a text
	bounds := []struct {
		marker string
		bound  int
		what   string
	}{
		{"⟨U+0001⟩", console.MaxStepText, "a step's text or the node's words"},
		{"⟨U+0002⟩", agent.MaxReasoningBytes, "a step's reasoning"},
		{"⟨U+0003⟩", console.MaxPartText, "a message's parts"},
		{"⟨U+0004⟩", console.MaxDiffText, "a held action's diff"},
		{"⟨U+0005⟩", audit.MaxReasonLength, "an audit entry's reason"},
		{"⟨U+200B⟩", console.MaxPartText, "a held action's descriptor"},
	}
	seen := make([]int, len(bounds))
	// Each <pre>, and each <p>, <dd> and <td> that holds none.
	blocks := preRE.FindAllStringSubmatch(body, -1)
	for _, m := range blockRE.FindAllStringSubmatch(body, -1) {
		if m[1] != "pre" && !strings.Contains(m[2], "<pre") && !strings.Contains(m[2], "<ul") {
			blocks = append(blocks, []string{m[0], m[2]})
		}
	}
	for _, m := range blocks {
		shown := html.UnescapeString(m[1])
		for i, b := range bounds {
			if !strings.Contains(shown, b.marker) {
				continue
			}
			seen[i]++
			if len(shown) > b.bound+slack || !strings.Contains(shown, "more bytes") {
				t.Errorf("%s is shown in %d bytes (at most %d and a line), cut %v", b.what, len(shown), b.bound, strings.Contains(shown, "more bytes"))
			}
			if rest := markerRE.ReplaceAllString(shown, ""); strings.Contains(rest, "⟨") || strings.Contains(rest, "U+") {
				i := max(0, strings.Index(rest, "⟨"))
				t.Errorf("%s shows a marker cut short: %q", b.what, rest[i:min(len(rest), i+60)])
			}
		}
	}
	for i, b := range bounds {
		if seen[i] == 0 {
			t.Errorf("the page shows no %s", b.what)
		}
	}

	// The paths a held action changes, in all: each path was bounded,
	// the list was not (a hundred paths of 2 KiB of look-alikes, each
	// spelled out in 21 KiB, were shown in 2 MiB).
	files := filesRE.FindStringSubmatch(body)
	if files == nil {
		t.Fatal("no paths of the held action on the page")
	}
	shown := html.UnescapeString(tagRE.ReplaceAllString(strings.ReplaceAll(files[1], "look-alike letters</span>", "</span>"), ""))
	if len(shown) > console.MaxPartText+slack || !strings.Contains(shown, "not shown") {
		t.Errorf("the paths are shown in %d bytes (at most %d and a line), cut %v", len(shown), console.MaxPartText, strings.Contains(shown, "not shown"))
	}
	if rest := aRE.ReplaceAllString(markerRE.ReplaceAllString(shown, ""), ""); strings.Contains(rest, "⟨") || strings.Contains(rest, "U+") || strings.Contains(rest, "\u0430") {
		t.Errorf("the paths show a marker cut short or a letter unmarked")
	}
}
