package node

import (
	"testing"
	"unicode/utf8"

	"github.com/snapnode/snapnode/snap"
)

// FuzzParseDecision: any payload the router accepts is either not a
// decision, a refusal
// naming a field of the decision or the task, or a decision within its
// limits on a task.
func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t1","message":{"messageId":"m","role":"user","parts":[{"data":{"decision":"approve"}}]}}`,
		`{"taskId":"t1","message":{"messageId":"m","role":"user","parts":[{"data":{"decision":"deny","reason":"no","actionId":"a"}}]}}`,
		`{"taskId":"t1","message":{"messageId":"m","role":"user","parts":[{"data":{"decision":1}}]}}`,
		`{"taskId":"t1","message":{"messageId":"m","role":"user","parts":[{"data":{"decision":"approve","x":1}}]}}`,
		`{"message":{"messageId":"m","role":"user","parts":[{"data":{"decision":"approve"}}]}}`,
		`{"taskId":"t1","message":{"messageId":"m","role":"user","parts":[{"text":"hi"}]}}`,
		`{}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		params, err := snap.ParseSendParams(payload)
		if err != nil {
			return // the router answers it; no handler sees it
		}
		taskID, d, err := parseDecision(params)
		switch {
		case err != nil:
			if d != nil || taskID != "" {
				t.Fatalf("a refusal with a result: %q %+v", taskID, d)
			}
		case d == nil:
			if taskID != "" {
				t.Fatalf("no decision but a task %q", taskID)
			}
		default:
			if taskID == "" || len(d.reason) > maxDecisionReason || !utf8.ValidString(d.reason) {
				t.Fatalf("accepted %q %+v", taskID, d)
			}
		}
	})
}
