package delegate

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent/worker"
)

const done = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`

// payload is a response to a step: task t in state, its history and
// artifacts (JSON array elements).
func payload(state, history, artifacts string) []byte {
	return []byte(`{"task":{"id":"t","status":{"state":"` + state + `","timestamp":"2026-01-01T00:00:00Z"},"history":[` + history + `],"artifacts":[` + artifacts + `]}}`)
}

func msg(id, role, data string) string {
	return `{"messageId":"` + id + `","role":"` + role + `","parts":[{"data":` + data + `}]}`
}

// A delegate that gives each answer as an agent message and as an
// artifact: the artifact of the step before is not the new step's answer.
func TestAnswerOfArtifactOfTheStepBefore(t *testing.T) {
	q1 := question{step: 0, sent: "u0", max: worker.DefaultMaxLineBytes}
	a1 := q1.answerOf(payload("input_required", msg("u0", "user", `{}`)+","+msg("m0", "agent", done),
		`{"artifactId":"a0","parts":[{"data":`+done+`}]}`))
	if a1.rule != "" || a1.pending {
		t.Fatalf("step 0: %+v", a1)
	}
	q2 := question{step: 1, task: "t", sent: "u1", seen: a1.seen, max: worker.DefaultMaxLineBytes}
	a2 := q2.answerOf(payload("working", msg("u0", "user", `{}`)+","+msg("m0", "agent", done)+","+msg("u1", "user", `{}`),
		`{"artifactId":"a0","parts":[{"data":`+done+`}]}`))
	if !a2.pending {
		t.Fatalf("step 1, delegate still working, step 0's artifact only: %+v; want pending", a2)
	}
}

// A delegate that reuses a message id: its answer after the step's own
// message is new, even when it says what the answer before said.
func TestAnswerOfReusedMessageID(t *testing.T) {
	q1 := question{step: 0, sent: "u0", max: worker.DefaultMaxLineBytes}
	a1 := q1.answerOf(payload("input_required", msg("u0", "user", `{}`)+","+msg("reply", "agent", done), ""))
	q2 := question{step: 1, task: "t", sent: "u1", seen: a1.seen, max: worker.DefaultMaxLineBytes}
	a2 := q2.answerOf(payload("input_required", msg("u0", "user", `{}`)+","+msg("reply", "agent", done)+","+msg("u1", "user", `{}`)+","+msg("reply", "agent", done), ""))
	if a2.rule != "" || a2.pending || !strings.Contains(string(a2.line), "COMPLETED") {
		t.Fatalf("step 1: %+v; want the answer after u1", a2)
	}
}
