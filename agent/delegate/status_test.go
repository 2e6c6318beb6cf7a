package delegate

import (
	"testing"

	"github.com/snapnode/snapnode/agent/worker"
)

// A task whose status has no timestamp, as the SNAP specification's own
// examples write some (a message/stream's final response, a deduplicated
// message/send), is read for its state and its answer: the delegate needs
// no more of the status.
func TestAnswerOfStatusWithoutTimestamp(t *testing.T) {
	q := question{step: 1, sent: "s", max: worker.DefaultMaxLineBytes}
	a := q.answerOf([]byte(`{"deduplicated":true,"task":{"id":"t","status":{"state":"completed"},"history":[{"messageId":"m","role":"agent","parts":[{"data":{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}}]}]}}`))
	if a.rule != "" || a.taskID != "t" || a.line == nil {
		t.Fatalf("answer: rule %q, reason %q, task %q, line %q; want the task's answer", a.rule, a.reason, a.taskID, a.line)
	}
	q = question{step: 1, sent: "s", max: worker.DefaultMaxLineBytes}
	w := q.answerOf([]byte(`{"task":{"id":"t","status":{"state":"working"}}}`))
	if !w.pending || w.taskID != "t" {
		t.Fatalf("a task at work without a timestamp: %+v; want pending", w)
	}
}
