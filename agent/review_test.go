package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// reviewHistory is a reviewed job's history: the worker writes and says
// COMPLETED, the supervisor sends it back, the worker says COMPLETED
// again, the supervisor accepts.
func reviewHistory() *History {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	resp := func(action, summary string) string {
		b, _ := json.Marshal(map[string]any{"action": action, "evidence_files": []string{}, "summary_for_supervisor": summary})
		return string(b)
	}
	mk := func(seq int, role string, before, after Status, kind, action, raw, outcome string) Interaction {
		phase := PhaseWork
		if role == RoleSupervisor {
			phase = PhaseReview
		}
		return Interaction{Sequence: seq, Timestamp: t0.Add(time.Duration(seq) * time.Second), StateBefore: before,
			Request:     Request{Metadata: RequestMetadata{Role: role, Phase: phase}},
			Response:    Response{Status: ResponseSuccess, Kind: kind, Action: action, RawResponse: raw, NewStatus: after, EvidenceFiles: []string{}},
			Observation: &Observation{Outcome: outcome}}
	}
	write := answerProposal(stuckID(0), "write", "WRITE_FILE", `{"path":"/sandbox/a.md","content":"a"}`)
	return &History{JobID: "j", CreatedAt: t0, Status: Success, Interactions: []Interaction{
		mk(0, RoleWorker, Running, Running, KindProposal, "WRITE_FILE", write, ObsCompleted),
		mk(1, RoleWorker, Running, Reviewing, KindAgentResponse, ActionCompleted, resp("COMPLETED", "done"), ObsCompleted),
		mk(2, RoleSupervisor, Reviewing, Running, KindAgentResponse, ActionRetry, resp("RETRY", "add b"), ObsRetried),
		mk(3, RoleWorker, Running, Reviewing, KindAgentResponse, ActionCompleted, resp("COMPLETED", "done, with b"), ObsCompleted),
		mk(4, RoleSupervisor, Reviewing, Reviewing, KindInvalid, "", answerProposal(stuckID(4), "act", "WRITE_FILE", `{"path":"/sandbox/b.md","content":"b"}`), ObsInvalid),
		mk(5, RoleSupervisor, Reviewing, Success, KindAgentResponse, ActionCompleted, resp("COMPLETED", "good"), ObsCompleted),
	}, RecoveryPoints: []RecoveryPoint{{CheckpointID: "work-complete-1", Sequence: 1, CanResumeFrom: true, ResumePhase: PhaseReview}}}
}

// Replay knows the review: both roles, the transitions of each, and
// refuses a history whose roles or transitions do not match.
func TestReplayReview(t *testing.T) {
	if err := Replay(reviewHistory(), 64<<10); err != nil {
		t.Fatalf("a reviewed job's history: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(h *History)
		field  string
	}{
		{"supervisor while running", func(h *History) { h.Interactions[0].Request.Metadata.Role = RoleSupervisor }, "request.metadata.role"},
		{"worker while reviewing", func(h *History) { h.Interactions[2].Request.Metadata.Role = RoleWorker }, "request.metadata.role"},
		{"supervisor RETRY ends the job", func(h *History) { h.Interactions[2].Response.NewStatus = Success }, "response.new_status"},
		{"worker's invalid answer that parses", func(h *History) {
			h.Interactions[4].Request.Metadata.Role, h.Interactions[4].StateBefore, h.Interactions[4].Response.NewStatus = RoleWorker, Running, Running
		}, "response.raw_response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := reviewHistory()
			tt.mutate(h)
			err := Replay(h, 64<<10)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Replay = %v; want an error on %s", err, tt.field)
			}
		})
	}
}
