package agent_test

import (
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
)

// canceledHistory is a job canceled in its one step: a THINK answer the
// cancel left unacted on, with observation outcome obs.
func canceledHistory(obs string) *agent.History {
	at := time.Date(2025, 1, 29, 10, 0, 1, 0, time.UTC)
	return &agent.History{JobID: "j", CreatedAt: at, Status: agent.Canceled, Interactions: []agent.Interaction{{
		Sequence: 0, Timestamp: at, StateBefore: agent.Running,
		Request: agent.Request{Metadata: agent.RequestMetadata{Role: agent.RoleWorker}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK",
			RawResponse: `{"schema_version":"1.0.0","id":"0b8f1a3e-6c2d-4f5a-9b7e-1d2c3b4a5f60","reasoning":"x","action":"THINK","args":{}}`,
			NewStatus:   agent.Canceled},
		Observation: &agent.Observation{Outcome: obs, Reason: "the task was canceled; the answer was not acted on"},
	}}}
}

// The last step may end the job CANCELED (the step its cancel gave up),
// but its answer and observation are still checked: a proposal's unknown
// observation is refused as it is in any other step. Before, a last step
// to CANCELED skipped the check of its transition altogether.
func TestReplayCanceledStepStillChecked(t *testing.T) {
	if err := agent.Replay(canceledHistory(agent.ObsNone), 64<<10); err != nil {
		t.Fatalf("the step given up does not replay: %v", err)
	}
	err := agent.Replay(canceledHistory("bogus"), 64<<10)
	var re *agent.ReplayError
	if !errors.As(err, &re) || re.Field != "observation" {
		t.Fatalf("Replay = %v; want the observation refused", err)
	}
}
