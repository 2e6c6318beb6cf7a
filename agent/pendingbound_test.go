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
// step's interaction, past the store's bound: what comes past it is left
// out with a note (the messages stay in the task's history and are
// counted told), the text kept is the oldest, whole at its front, so the
// runtime's answer to it still takes it off; the next message after that
// is taken again. Before, every message was appended and the pending
// input grew to the sum of them.
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
		// 40 follow-ups of 10 KiB while the model thinks: 400 KiB.
		for i := range 40 {
			texts = append(texts, fmt.Sprintf("%03d %s", i, strings.Repeat("x", 10<<10)))
			if err := q.Take(ctx, queueTask("t1", texts...)); err != nil {
				t.Fatal(err)
			}
		}
		got := mustGet(t, ctx, s, "t1")
		if len(got.PendingInput) > bound {
			t.Fatalf("pending input of %d bytes, want at most %d: %q", len(got.PendingInput), bound, got.PendingInput[len(got.PendingInput)-400:])
		}
		if got.Told != len(texts) {
			t.Errorf("told %d messages, want %d", got.Told, len(texts))
		}
		if !strings.HasPrefix(got.PendingInput, "Message from the requester: 000 ") {
			t.Errorf("pending input starts %.40q, want the first follow-up", got.PendingInput)
		}
		if !strings.Contains(got.PendingInput, "left out") || !strings.Contains(got.PendingInput, "agent.max_pending_input_bytes") {
			t.Errorf("pending input ends %q, want the note of what was left out", got.PendingInput[max(0, len(got.PendingInput)-300):])
		}
		// The runtime answers what it was given: taken off whole.
		mine.Steps, mine.NextSeq = 1, 1
		if err := s.Write(ctx, Save{Job: mine, Interaction: storeInteraction(0, "seen"), Holder: "rt", Consumed: got.PendingInput}); err != nil {
			t.Fatal(err)
		}
		if p := mustGet(t, ctx, s, "t1").PendingInput; p != "" {
			t.Fatalf("pending input after the answer: %d bytes, want none", len(p))
		}
		texts = append(texts, "and be brief")
		if err := q.Take(ctx, queueTask("t1", texts...)); err != nil {
			t.Fatal(err)
		}
		if p := mustGet(t, ctx, s, "t1").PendingInput; p != "Message from the requester: and be brief" {
			t.Errorf("pending input after the next message: %q", p)
		}
	})
}
