package delegate

import (
	"bytes"
	"testing"

	"github.com/snapnode/snapnode/agent/worker"
)

// FuzzAnswerOf: any response payload is either refused with a rule and a
// reason, or yields a task id and one line that the workers' parser
// accepts.
func FuzzAnswerOf(f *testing.F) {
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"completed","timestamp":"2026-01-01T00:00:00Z"},"history":[{"messageId":"m","role":"agent","parts":[{"data":{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}}]}]}}`))
	f.Add([]byte(`{"task":{"id":"t","status":{"state":"working","timestamp":"2026-01-01T00:00:00Z"},"artifacts":[{"artifactId":"a","parts":[{"data":{"hello":1}}]}]}}`))
	f.Add([]byte(`{"error":{"code":1004,"message":"no"}}`))
	f.Add([]byte(`garbage`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		id, line, rule, reason := answerOf(payload, 0, worker.DefaultMaxLineBytes)
		if rule != "" {
			if reason == "" || line != nil {
				t.Fatalf("refused with rule %q, reason %q, line %q", rule, reason, line)
			}
			return
		}
		if id == "" || bytes.ContainsAny(line, "\n") {
			t.Fatalf("accepted task %q line %q", id, line)
		}
		if _, err := worker.ParseLine(line, worker.DefaultMaxLineBytes); err != nil {
			t.Fatalf("accepted %q, which the workers' parser refuses: %v", line, err)
		}
	})
}
