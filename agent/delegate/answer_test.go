package delegate

import (
	"bytes"
	"testing"

	"github.com/snapnode/snapnode/agent/worker"
)

// FuzzAnswerOf: any response payload is either refused with a rule and a
// reason, or waits for the delegate at work on a task, or yields a task
// id, one line that the workers' parser accepts and where it came from,
// never what answered the step before.
func FuzzAnswerOf(f *testing.F) {
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"completed","timestamp":"2026-01-01T00:00:00Z"},"history":[{"messageId":"m","role":"agent","parts":[{"data":{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}}]}]}}`))
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"working","timestamp":"2026-01-01T00:00:00Z"},"artifacts":[{"artifactId":"a","parts":[{"data":{"hello":1}}]}]}}`))
	f.Add([]byte(`{"error":{"code":1004,"message":"no"}}`))
	f.Add([]byte(`garbage`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		q := question{step: 1, sent: "m", answered: "message:m0:0000000000000000", max: worker.DefaultMaxLineBytes}
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
		if a.taskID == "" || a.source == "" || a.source == q.answered || bytes.ContainsAny(a.line, "\n") {
			t.Fatalf("accepted task %q line %q from %q", a.taskID, a.line, a.source)
		}
		if _, err := worker.ParseLine(a.line, worker.DefaultMaxLineBytes); err != nil {
			t.Fatalf("accepted %q, which the workers' parser refuses: %v", a.line, err)
		}
	})
}
