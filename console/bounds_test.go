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
	"github.com/snapnode/snapnode/tasks"
)

// floodSource is fakeSource with a task and a job as large as a peer and
// a model can make them: messages of many parts each under the cut of
// one part's text, a data part of a long array (indented, each element a
// line), and steps whose outcome carries the diff of a large file.
type floodSource struct {
	fakeSource
	messages, parts, partSize int
	steps, diffSize           int
}

func (s floodSource) Task(ctx context.Context, id string) (*tasks.Task, error) {
	t, err := s.fakeSource.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	part := strings.Repeat("x", s.partSize-1) + "\n"
	// 1 MiB of compact JSON (snap.MaxDataSize) is half a million
	// elements of an array, each a line of its own once indented.
	data := []byte(`{"a":[` + strings.Repeat("0,", 128<<10) + `0]}`)
	t.History = nil
	for m := range s.messages {
		msg := tasks.Message{MessageID: fmt.Sprintf("m%d", m), Role: "user"}
		for range s.parts {
			msg.Parts = append(msg.Parts, tasks.Part{Text: text(part)})
		}
		if m == 0 {
			msg.Parts = []tasks.Part{{Data: data}}
		}
		t.History = append(t.History, msg)
	}
	return t, nil
}

func (s floodSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	j, _, err := s.fakeSource.Job(ctx, taskID, limit)
	diff := "--- /dev/null\n+++ /sandbox/big.txt\n@@ -0,0 +1 @@\n+" + strings.Repeat("y", s.diffSize) + "\n"
	// A requester's follow-up messages, told to the model at the next
	// step (up to a MiB of them, agent.DefaultMaxPendingInput), and a
	// model's or a worker's words.
	big := strings.Repeat("z", s.diffSize)
	var its []agent.Interaction
	for i := range s.steps {
		its = append(its, agent.Interaction{Sequence: i, Timestamp: t0, Guidance: big,
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", SummaryForSupervisor: big, Error: big},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, ActionID: fmt.Sprintf("act-%d", i+10), Diff: diff, Reason: big}})
	}
	return j, its, err
}

var (
	preRE = regexp.MustCompile(`(?s)<pre[^>]*>(.*?)</pre>`)
	pRE   = regexp.MustCompile(`(?s)<p[ >].*?</p>`)
)

// TestTaskPageBounded: whatever a peer and a model put in a task, each
// block of text its page shows is bounded: a message's parts together
// (not each part alone: a peer's message of 256 KiB in a hundred parts
// of 2.5 KiB, a hundred such messages, made a page of 25 MiB, and a data
// part was shown whole, indented, a line an element), and the diff an
// agent's step carried out (shown whole, where the held action's is cut
// at MaxDiffText: a file of 1 MiB written at each of 200 steps made a
// page of hundreds of MiB, the held diff shown whole again under its
// step), and a step's texts (what the model was told, a requester's
// follow-ups of up to a MiB among it, the words of its answer and its
// outcome), the step's diff with them cut at MaxStepText. What is cut
// says so.
func TestTaskPageBounded(t *testing.T) {
	src := floodSource{messages: 20, parts: 100, partSize: 2500, steps: 10, diffSize: 256 << 10}
	r := newRig(t, func(c *console.Config) { c.Source = src })
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	if w.Code != 200 {
		t.Fatalf("task page: %d\n%s", w.Code, w.Body)
	}
	body := w.Body.String()
	const slack = 256 // the line that says what was left out
	var messages, diffs int
	for _, m := range preRE.FindAllStringSubmatch(body, -1) {
		shown := html.UnescapeString(m[1])
		switch {
		case strings.HasPrefix(shown, "--- /dev/null\n+++ /sandbox/big.txt"):
			diffs++
			if len(shown) > console.MaxStepText+slack || !strings.Contains(shown, "more bytes of the diff not shown") {
				t.Errorf("a step's diff is shown in %d bytes (at most %d), cut %v", len(shown), console.MaxStepText, strings.Contains(shown, "not shown"))
			}
		case strings.Contains(shown, "xxxx") || strings.Contains(shown, `"a": [`):
			messages++
			if len(shown) > console.MaxPartText+slack || !strings.Contains(shown, "more bytes not shown") {
				t.Errorf("a message is shown in %d bytes (at most %d), cut %v", len(shown), console.MaxPartText, strings.Contains(shown, "not shown"))
			}
		}
	}
	var texts int
	for _, m := range pRE.FindAllString(body, -1) {
		shown := html.UnescapeString(m)
		if !strings.Contains(shown, "zzzz") {
			continue
		}
		texts++
		if len(shown) > console.MaxStepText+slack || !strings.Contains(shown, "more bytes not shown") {
			t.Errorf("a step's text is shown in %d bytes (at most %d), cut %v: %.80s", len(shown), console.MaxStepText, strings.Contains(shown, "not shown"), shown)
		}
	}
	if texts != 4*src.steps { // what the model was told, its summary, its error, the outcome's reason
		t.Errorf("the page shows %d texts of the steps, want %d", texts, 4*src.steps)
	}
	if messages != src.messages || diffs != src.steps {
		t.Errorf("the page shows %d messages and %d step diffs, want %d and %d", messages, diffs, src.messages, src.steps)
	}
}
