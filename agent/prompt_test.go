package agent

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	promptSystem = "You are the agent of a test host. Answer with one JSON object."
	promptTask   = "Task from bc1ptest:\nSummarise the notes into /sandbox/report.md.\n"
)

// promptStep is the i-th step as jobRun.prompt makes it: a proposal, its
// observation with an output of size bytes, and the condensed form of a
// long observation.
func promptStep(i int, action string, size int) step {
	args := fmt.Sprintf(`{"path":"/sandbox/notes-%d.md"}`, i)
	if action == "THINK" {
		args = `{}`
	}
	s := step{answer: answerProposal(stuckID(i), fmt.Sprintf("step %d needs this", i), action, args), think: action == "THINK"}
	s.feedback = fmt.Sprintf(`{"outcome":"completed","action":%q,"output":"%s"}`, action, strings.Repeat("x", size))
	if len(s.feedback) > 512 {
		s.condensed = condenseText(action, ObsCompleted, len(s.feedback), shortHash(s.feedback))
	}
	return s
}

// wantPrompt is the prompt buildMessages documents for steps[from:]: the
// note when steps are left out, old observations condensed and old THINKs
// dropped (not the guidance before them) when condense is set, the last
// two steps whole.
func wantPrompt(steps []step, now string, from int, condense bool) []ChatMessage {
	out := []ChatMessage{{Role: RoleSystem, Content: promptSystem}, {Role: RoleUser, Content: promptTask}}
	if from > 0 {
		out = append(out, ChatMessage{Role: RoleUser, Content: fmt.Sprintf("[%d earlier steps are left out to fit the context; their effects are in the workspace]", from)})
	}
	for i, s := range steps {
		old := i < len(steps)-2
		if s.guidance != "" {
			// Kept even when its step is dropped or left out: a person
			// said it.
			out = append(out, ChatMessage{Role: RoleUser, Content: s.guidance})
		}
		if i < from || condense && old && s.think {
			continue
		}
		out = append(out, ChatMessage{Role: RoleAssistant, Content: s.answer})
		fb := s.feedback
		if condense && old && s.condensed != "" {
			fb = s.condensed
		}
		if fb != "" {
			out = append(out, ChatMessage{Role: RoleUser, Content: fb})
		}
	}
	if now != "" {
		out = append(out, ChatMessage{Role: RoleUser, Content: now})
	}
	return out
}

func sameMessages(t *testing.T, got, want []ChatMessage) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	t.Errorf("got %d messages (%d tokens), want %d (%d tokens)", len(got), promptTokens(got), len(want), promptTokens(want))
	for i := range max(len(got), len(want)) {
		var g, w ChatMessage
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("message %d:\n got  %s: %.120q\n want %s: %.120q", i, g.Role, g.Content, w.Role, w.Content)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 4}, {"a", 5}, {"abcd", 5}, {"abcde", 6}, {strings.Repeat("x", 400), 104},
	}
	for _, tt := range tests {
		if got := estimateTokens(tt.s); got != tt.want {
			t.Errorf("estimateTokens(%d bytes) = %d; want %d", len(tt.s), got, tt.want)
		}
	}
}

func TestBuildMessages(t *testing.T) {
	const now = "Message from the requester: British spelling, please."
	steps := []step{
		promptStep(0, "LIST_FILES", 100),
		promptStep(1, "READ_FILE", 4000),
		promptStep(2, "THINK", 20),
		promptStep(3, "READ_FILE", 3000),
		promptStep(4, "THINK", 20),
		promptStep(5, "READ_FILE", 2000),
		promptStep(6, "READ_FILE", 2500),
	}
	steps[3].guidance = "The operator approved action 42."
	steps[4].guidance = "Message from the requester: British spelling."
	full := wantPrompt(steps, now, 0, false)
	condensed := wantPrompt(steps, now, 0, true)
	if promptTokens(condensed) >= promptTokens(full) {
		t.Fatalf("the test's steps do not shrink when condensed: %d, %d tokens", promptTokens(condensed), promptTokens(full))
	}

	t.Run("within budget", func(t *testing.T) {
		for _, budget := range []int{promptTokens(full), promptTokens(full) + 1, 1 << 20} {
			sameMessages(t, buildMessages(promptSystem, promptTask, steps, now, budget), full)
		}
	})
	t.Run("no steps", func(t *testing.T) {
		want := []ChatMessage{{Role: RoleSystem, Content: promptSystem}, {Role: RoleUser, Content: promptTask}}
		sameMessages(t, buildMessages(promptSystem, promptTask, nil, "", 1<<20), want)
	})
	t.Run("condensed", func(t *testing.T) {
		for _, budget := range []int{promptTokens(full) - 1, promptTokens(condensed)} {
			got := buildMessages(promptSystem, promptTask, steps, now, budget)
			sameMessages(t, got, condensed)
			joined := contents(got)
			for i, s := range steps {
				switch {
				case i >= len(steps)-2:
					if !strings.Contains(joined, s.answer) || !strings.Contains(joined, s.feedback) {
						t.Errorf("step %d, one of the last two, is not whole", i)
					}
				case s.think:
					if strings.Contains(joined, s.answer) {
						t.Errorf("old THINK step %d is still in the prompt", i)
					}
				case s.condensed != "":
					if !strings.Contains(joined, s.condensed) || strings.Contains(joined, s.feedback) {
						t.Errorf("old step %d: its observation is not condensed", i)
					}
					if !strings.Contains(s.condensed, "sha256 "+shortHash(s.feedback)) || !strings.Contains(s.condensed, strconv.Itoa(len(s.feedback))+" bytes") {
						t.Errorf("condensed %q does not name the size and hash", s.condensed)
					}
				default:
					if !strings.Contains(joined, s.feedback) {
						t.Errorf("old step %d: its short observation is gone", i)
					}
				}
			}
			if strings.Contains(joined, "earlier steps are left out") {
				t.Errorf("steps left out although the condensed prompt fits")
			}
		}
	})
	t.Run("left out", func(t *testing.T) {
		for from := 1; from < len(steps); from++ {
			want := wantPrompt(steps, now, from, true)
			// The largest budget that leaves out exactly from steps.
			budget := promptTokens(wantPrompt(steps, now, from-1, true)) - 1
			if promptTokens(want) > budget {
				continue // leaving out one more step saves nothing: from is never the answer
			}
			t.Run(strconv.Itoa(from), func(t *testing.T) {
				got := buildMessages(promptSystem, promptTask, steps, now, budget)
				sameMessages(t, got, want)
				if got[2].Content != fmt.Sprintf("[%d earlier steps are left out to fit the context; their effects are in the workspace]", from) {
					t.Errorf("the note is %q", got[2].Content)
				}
				if n := promptTokens(got); n > budget {
					t.Errorf("%d tokens over a budget of %d", n, budget)
				}
			})
		}
	})
	t.Run("nothing fits", func(t *testing.T) {
		// The last step stays whole, with the note and what people
		// said, whatever the budget.
		got := buildMessages(promptSystem, promptTask, steps, now, 1)
		sameMessages(t, got, wantPrompt(steps, now, len(steps)-1, true))
	})
}

func contents(msgs []ChatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	return b.String()
}

var leftOutNote = regexp.MustCompile(`^\[(\d+) earlier steps are left out to fit the context`)

// TestBuildMessagesBudgets checks, over every budget, what buildMessages
// promises: the system prompt and the task first, what the model is told
// now last, the last step whole; within budget whenever the system prompt,
// the task, the note, what people said, the last step and now fit; both of
// the last two steps whole when they fit with the note; the steps left out
// the oldest; no fewer steps for a larger budget.
func TestBuildMessagesBudgets(t *testing.T) {
	const now = "The operator denied action 7."
	shapes := map[string][]step{}
	var mixed []step
	for i := range 12 {
		action, size := "READ_FILE", 50+(i*937)%3000
		if i%4 == 2 {
			action, size = "THINK", 10
		}
		mixed = append(mixed, promptStep(i, action, size))
	}
	shapes["mixed"] = mixed
	var short []step
	for i := range 9 {
		short = append(short, promptStep(i, "LIST_FILES", 40))
	}
	shapes["short observations"] = short
	var thinks []step
	for i := range 8 {
		thinks = append(thinks, promptStep(i, "THINK", 0))
	}
	shapes["thinks"] = thinks
	shapes["one step"] = []step{promptStep(0, "READ_FILE", 5000)}
	shapes["two steps"] = []step{promptStep(0, "READ_FILE", 5000), promptStep(1, "READ_FILE", 5000)}

	for name, steps := range shapes {
		t.Run(name, func(t *testing.T) {
			full := promptTokens(wantPrompt(steps, now, 0, false))
			n := len(steps)
			// The last two steps whole, with the note when older ones are
			// left out and what people said in them: only then are both
			// sure to stay.
			fitNote := promptTokens(wantPrompt(steps, now, max(0, n-2), true))
			prevKept := -1
			for budget := 0; budget <= full+8; budget++ {
				got := buildMessages(promptSystem, promptTask, steps, now, budget)
				if len(got) < 3 || got[0].Content != promptSystem || got[1].Content != promptTask || got[len(got)-1].Content != now {
					t.Fatalf("budget %d: the prompt does not start with the system prompt and task and end with now", budget)
				}
				tokens := promptTokens(got)
				if budget >= full && tokens != full {
					t.Fatalf("budget %d: %d tokens; want everything (%d)", budget, tokens, full)
				}
				// The least the prompt can be: the note, what people said,
				// and the last step whole.
				if least := promptTokens(wantPrompt(steps, now, n-1, true)); budget >= least && tokens > budget {
					t.Fatalf("budget %d: %d tokens, although the last step fits in %d", budget, tokens, least)
				}
				joined := contents(got)
				last := steps[n-1]
				if !strings.Contains(joined, last.answer+"\n"+last.feedback+"\n") {
					t.Fatalf("budget %d: the last step is not whole", budget)
				}
				if budget >= fitNote && n >= 2 {
					s := steps[n-2]
					if !strings.Contains(joined, s.answer+"\n"+s.feedback+"\n") {
						t.Fatalf("budget %d: the step before the last is not whole", budget)
					}
				}
				from := 0
				if m := leftOutNote.FindStringSubmatch(got[2].Content); m != nil {
					from, _ = strconv.Atoi(m[1])
				}
				kept := 0
				for i, s := range steps {
					present := strings.Contains(joined, s.answer)
					if i < from && present {
						t.Fatalf("budget %d: step %d is shown although the note leaves %d out", budget, i, from)
					}
					if i >= from && !s.think && !present {
						t.Fatalf("budget %d: step %d is missing, and not among the %d left out", budget, i, from)
					}
					if present {
						kept++
					}
				}
				if kept < prevKept {
					t.Fatalf("budget %d keeps %d steps, fewer than budget %d kept (%d)", budget, kept, budget-1, prevKept)
				}
				prevKept = kept
			}
		})
	}
}

// TestBuildMessagesKeepsGuidance: what the requester or an operator told
// the model before a step (Interaction.Guidance: "the prompt of later
// calls shows it again") stays in the prompt when that step's THINK is
// dropped to save context.
func TestBuildMessagesKeepsGuidance(t *testing.T) {
	const guidance = "Message from the requester: write the report in French."
	steps := []step{
		promptStep(0, "READ_FILE", 3000),
		promptStep(1, "THINK", 10),
		promptStep(2, "READ_FILE", 3000),
		promptStep(3, "READ_FILE", 3000),
		promptStep(4, "READ_FILE", 3000),
	}
	steps[1].guidance = guidance
	full := wantPrompt(steps, "", 0, false)
	got := buildMessages(promptSystem, promptTask, steps, "", promptTokens(full)-1)
	if strings.Contains(contents(got), "earlier steps are left out") {
		t.Fatal("the test's budget leaves steps out; it should only condense")
	}
	if strings.Contains(contents(got), steps[1].answer) {
		t.Error("the old THINK is still in the condensed prompt")
	}
	if !strings.Contains(contents(got), guidance) {
		t.Errorf("the requester's guidance before an old THINK is gone from the condensed prompt")
	}
}

// A requester who wrote dozens of follow-ups does not push the prompt
// past its budget: once every step is left out and what was said alone
// is too long, its oldest messages are left out with a note, the newest
// kept. Before, every message was kept whole, the prompt passed the
// budget, and the job ended STUCK on the server's context-length errors.
func TestBuildMessagesBoundsGuidance(t *testing.T) {
	var steps []step
	for i := range 40 {
		s := promptStep(i, "READ_FILE", 100)
		s.guidance = fmt.Sprintf("Message from the requester %d: %s", i, strings.Repeat("please ", 250))
		steps = append(steps, s)
	}
	const budget = 8000
	got := buildMessages(promptSystem, promptTask, steps, "", budget)
	if n := promptTokens(got); n > budget {
		t.Fatalf("the prompt is %d tokens, over its budget of %d", n, budget)
	}
	all := contents(got)
	if !strings.Contains(all, "Message from the requester 39:") || !strings.Contains(all, "earlier messages from the requester or an operator are left out") {
		t.Errorf("want the newest message kept and a note for those left out")
	}
	if strings.Contains(all, "Message from the requester 0:") {
		t.Errorf("the oldest message is still in a prompt that could not hold them all")
	}
}

// TestPromptKeepsTheNewestInput: what was said since the last call,
// past its share of the prompt, is shown from its newest texts, as the
// pending input's bound keeps them: the oldest are left out with a note.
// A newest text too long alone shows its front. Before, the front of the
// whole was shown, and the latest instruction left out.
func TestPromptKeepsTheNewestInput(t *testing.T) {
	old := "Message from the requester: " + strings.Repeat("old ", 500)
	s := old + separator + old + separator + "Message from the requester: delete nothing"
	got := fitNewest(s, 1000)
	if !strings.HasSuffix(got, "Message from the requester: delete nothing") || strings.Contains(got, "old old") {
		t.Errorf("fitNewest = %q, want the newest message alone", got)
	}
	if !strings.HasPrefix(got, fmt.Sprintf("[%d earlier bytes left out", len(s)-len("Message from the requester: delete nothing"))) {
		t.Errorf("fitNewest = %q, want the note of what was left out first", got)
	}
	long := "Message from the requester: NEWEST " + strings.Repeat("x", 5000)
	got = fitNewest(old+separator+long, 1000)
	if !strings.Contains(got, "NEWEST") || strings.Contains(got, "old old") || len(got) > 1100 {
		t.Errorf("fitNewest of a long newest text = %.200q (%d bytes), want its front", got, len(got))
	}
	if got := fitNewest("short", 1000); got != "short" {
		t.Errorf("fitNewest(short) = %q", got)
	}
}
