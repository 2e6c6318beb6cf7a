package delegate

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/tasks"
)

// FuzzAnswerOf: any response payload is either refused with a rule and a
// reason, or waits for the delegate at work on a task, or yields a task
// id, one line that the workers' parser accepts and where it came from,
// never an answer the step before saw unless it came after the step's own
// message.
func FuzzAnswerOf(f *testing.F) {
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"completed","timestamp":"2026-01-01T00:00:00Z"},"history":[{"messageId":"m","role":"agent","parts":[{"data":{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}}]}]}}`))
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"working","timestamp":"2026-01-01T00:00:00Z"},"artifacts":[{"artifactId":"a","parts":[{"data":{"hello":1}}]}]}}`))
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"input_required","timestamp":"2026-01-01T00:00:00Z"},"history":[{"messageId":"s","role":"user","parts":[{"data":{}}]},{"messageId":"m","role":"agent","parts":[{"data":{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}}]}]}}`))
	f.Add([]byte(`{"error":{"code":1004,"message":"no"}}`))
	f.Add([]byte(`garbage`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		// seen holds the first seed's answer: refused there, taken after
		// the step's message in the third.
		seen := []string{"message:m0:0000000000000000",
			sourceOf("message", "m", []byte(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`))}
		q := question{step: 1, sent: "s", seen: seen, max: worker.DefaultMaxLineBytes}
		a := q.answerOf(payload)
		switch {
		case a.rule != "":
			if a.reason == "" || a.line != nil || a.pending {
				t.Fatalf("refused with rule %q, reason %q, line %q, pending %v", a.rule, a.reason, a.line, a.pending)
			}
			return
		case a.pending:
			if a.taskID == "" || a.line != nil {
				t.Fatalf("pending on task %q with line %q", a.taskID, a.line)
			}
			return
		}
		var task struct{ Task *tasks.Task }
		_ = json.Unmarshal(payload, &task)
		_, _, fresh := answerPart(task.Task, q.sent)
		if a.taskID == "" || a.source == "" || (slices.Contains(q.seen, a.source) && !fresh) || a.seen[0] != a.source ||
			bytes.ContainsAny(a.line, "\n") {
			t.Fatalf("accepted task %q line %q from %q (seen %q)", a.taskID, a.line, a.source, a.seen)
		}
		if _, err := worker.ParseLine(a.line, worker.DefaultMaxLineBytes); err != nil {
			t.Fatalf("accepted %q, which the workers' parser refuses: %v", a.line, err)
		}
	})
}
