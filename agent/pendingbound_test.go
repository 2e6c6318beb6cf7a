package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPendingInputIsBounded: a requester flooding a job at work with
// follow-ups (each within the task's bounds) cannot grow the job's
// pending input, held in its row, read at each step and kept with the
// step's interaction, past the store's bound. What is kept is the
// newest, as the prompt's own cut keeps the newest messages: the latest
// instruction wins, and the oldest are left out with a note (they stay
// in the task's history and are counted told). A step that read the
// input before the bound dropped part of it takes off exactly what it
// was told: the messages added since stay, whole. Before, the oldest
// were kept and the newest left out until the next step.
func TestPendingInputIsBounded(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		const bound = 64 << 10
		s.SetMaxPendingInput(bound)
		q := NewQueue(s, func() time.Time { return storeT0 })
		texts := []string{"summarise notes.md"}
		if err := q.Take(ctx, queueTask("t1", texts...)); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Claim(ctx, "t1", "rt", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		mine := mustGet(t, ctx, s, "t1")
		mine.Status = Running
		if err := s.Write(ctx, Save{Job: mine, Holder: "rt"}); err != nil {
			t.Fatal(err)
		}
		tell := func(text string) {
			t.Helper()
			texts = append(texts, text)
			if err := q.Take(ctx, queueTask("t1", texts...)); err != nil {
				t.Fatal(err)
			}
		}
		// answer stores a step's answer to what it read (as call and
		// prepare do).
		answer := func(read string, end int64) {
			t.Helper()
			mine.Steps++
			it := storeInteraction(mine.NextSeq, "seen")
			mine.NextSeq++
			if err := s.Write(ctx, Save{Job: mine, Interaction: it, Holder: "rt", Consumed: read, ConsumedEnd: end}); err != nil {
				t.Fatal(err)
			}
		}
		tell("first: use notes.md")
		// The model is told the first follow-up; meanwhile, 40 follow-ups
		// of 10 KiB: 400 KiB.
		read, end, _, _, err := s.StepInput(ctx, "t1")
		if err != nil || read != "Message from the requester: first: use notes.md" {
			t.Fatalf("StepInput = %q, %v", read, err)
		}
		for i := range 40 {
			tell(fmt.Sprintf("%03d %s", i, strings.Repeat("x", 10<<10)))
		}
		got := mustGet(t, ctx, s, "t1")
		if len(got.PendingInput) > bound {
			t.Fatalf("pending input of %d bytes, want at most %d", len(got.PendingInput), bound)
		}
		if got.Told != len(texts) {
			t.Errorf("told %d messages, want %d", got.Told, len(texts))
		}
		if !strings.HasSuffix(got.PendingInput, "Message from the requester: 039 "+strings.Repeat("x", 10<<10)) {
			t.Errorf("pending input ends %q, want the newest follow-up whole", got.PendingInput[max(0, len(got.PendingInput)-100):])
		}
		if !strings.HasPrefix(got.PendingInput, "[") || !strings.Contains(got.PendingInput[:300], "left out") ||
			!strings.Contains(got.PendingInput[:300], "agent.max_pending_input_bytes") || !strings.Contains(got.PendingInput[:300], "history") {
			t.Errorf("pending input starts %q, want the note of what was left out", got.PendingInput[:300])
		}
		if strings.Contains(got.PendingInput, "first: use notes.md") || strings.Contains(got.PendingInput, "Message from the requester: 000 ") {
			t.Error("the oldest messages were kept")
		}
		// The step answers what it read, dropped since: the newest stay.
		answer(read, end)
		if p := mustGet(t, ctx, s, "t1").PendingInput; p != got.PendingInput {
			t.Fatalf("pending input after the answer to a text dropped since: %d bytes, want the %d kept", len(p), len(got.PendingInput))
		}
		// The next step is told the newest; a message comes while it
		// thinks, and the bound drops the front of what it was told.
		read, end, _, _, err = s.StepInput(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		tell("and be brief")
		answer(read, end)
		if p := mustGet(t, ctx, s, "t1").PendingInput; p != "Message from the requester: and be brief" {
			t.Errorf("pending input after the answer: %.200q, want the message that came since", p)
		}
		// Told that, nothing is left.
		read, end, _, _, err = s.StepInput(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		answer(read, end)
		if p := mustGet(t, ctx, s, "t1").PendingInput; p != "" {
			t.Errorf("pending input after the last answer: %q", p)
		}
	})
}
