// Package agenttest builds agents' job histories for the tests of the
// agent and of the packages above it. It is for tests only: nothing
// outside _test.go files imports it.
package agenttest

import (
	"context"
	"strings"
	"time"

	"github.com/snapnode/snapnode/agent"
)

// think is the model's answer of every step WriteThinking writes.
const think = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"THINK","args":{}}`

// WriteThinking writes steps THINK interactions of job j to st, numbered
// from 0, the first at at and each next a second later, leaving j
// running with steps steps. Each call sends the system prompt, the task
// and, from the second on, its last step: the model's answer and a user
// message of size bytes; each observation's text is size bytes too. Once
// its messages are rebuilt, the history is about steps×2×size bytes.
func WriteThinking(ctx context.Context, st *agent.Store, j *agent.Job, at time.Time, steps, size int) error {
	for i := range steps {
		msgs := []agent.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "task"}}
		if i > 0 {
			msgs = append(msgs, agent.ChatMessage{Role: "assistant", Content: think},
				agent.ChatMessage{Role: "user", Content: strings.Repeat(string(rune('a'+i%26)), size)})
		}
		it := &agent.Interaction{Sequence: i, Timestamp: at.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
			Request:     agent.Request{Messages: msgs, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK", RawResponse: think, NewStatus: agent.Running},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, Text: strings.Repeat(string(rune('a'+(i+1)%26)), size)}}
		j.Status, j.NextSeq, j.Steps = agent.Running, i+1, i+1
		if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
			return err
		}
	}
	return nil
}
