package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

func newHolder() string { return "agent-" + uuid.NewString() }

// shortHash is the hex SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// answerSchema is what the model may answer, one self-contained JSON
// Schema for response_format.
var answerSchema = schemas.AgentAnswerBundle

// outcomeOf is the observation's word for res's outcome.
func outcomeOf(res *executor.Result) string {
	switch res.Outcome {
	case executor.Completed:
		return ObsCompleted
	case executor.Failed:
		return ObsFailed
	}
	return ObsNeedsConfirmation
}

// observe turns an executor result into what the model is told: the
// outcome and the runtime output (the executor's success output or
// structured error, see executor.Result.Output), with a file's content
// cut to max bytes (the model is told it was cut, the size and the hash).
func observe(res *executor.Result, max int) *Observation {
	o := &Observation{ActionID: res.ActionID, Reason: res.Reason, Diff: res.Diff, Outcome: outcomeOf(res)}
	out := json.RawMessage(invisible.EscapeJSON(boundOutput(res.Output, max)))
	o.Output = out
	fb := map[string]any{"outcome": o.Outcome, "action": res.Action}
	if len(out) > 0 {
		fb["output"] = out
	}
	switch res.Outcome {
	case executor.NeedsConfirmation:
		fb["note"] = "an operator must confirm this action; the job waits for the decision: " + res.Reason
	case executor.Failed:
		fb["reason"] = res.Reason
	}
	if res.Diff != "" && len(res.Diff) <= max {
		fb["diff"] = res.Diff
	}
	b, _ := json.Marshal(fb)
	o.Text = string(invisible.EscapeJSON(b))
	return o
}

// boundOutput cuts a READ_FILE result's content to max bytes, saying so.
func boundOutput(out json.RawMessage, max int) json.RawMessage {
	if len(out) <= max {
		return out
	}
	var o struct {
		Status string `json:"status"`
		Action string `json:"action"`
		Result *struct {
			Content  string `json:"content"`
			Encoding string `json:"encoding,omitempty"`
		} `json:"result"`
	}
	if json.Unmarshal(out, &o) != nil || o.Result == nil || len(o.Result.Content) <= max {
		b, _ := json.Marshal(map[string]any{"truncated": true, "size": len(out), "head": cut(string(out), max)})
		return b
	}
	sum := sha256.Sum256([]byte(o.Result.Content))
	b, _ := json.Marshal(map[string]any{"status": o.Status, "action": o.Action, "result": map[string]any{
		"content": cut(o.Result.Content, max), "encoding": o.Result.Encoding, "truncated": true,
		"size": len(o.Result.Content), "sha256": hex.EncodeToString(sum[:]),
		"note": fmt.Sprintf("only the first %d bytes are shown", max)}})
	return b
}

// Artifacts are what an executor result leaves on its task: the runtime
// output (the executor's success output or structured error) as a data part,
// and the diff of the changes as text. While an action waits for
// confirmation the diff to confirm is left instead. The proposals of a peer
// and of the agent leave the same artifacts.
func Artifacts(res *executor.Result) []tasks.Artifact {
	var out []tasks.Artifact
	if len(res.Output) > 0 {
		name := "result of " + res.Action
		if res.Action == "" { // data refused before its action was known
			name = "result of action " + res.ActionID
		}
		out = append(out, tasks.Artifact{ArtifactID: "result-" + res.ActionID, Name: name,
			Parts: []tasks.Part{tasks.DataPart(json.RawMessage(res.Output))}})
	}
	if res.Diff != "" {
		id, name := "diff-"+res.ActionID, "changes made by "+res.Action
		if res.Outcome == executor.NeedsConfirmation {
			id, name = "pending-"+uuid.NewString(), "changes awaiting confirmation of action "+res.ActionID
		}
		d := tasks.TextPart(res.Diff)
		d.MediaType = "text/x-diff"
		out = append(out, tasks.Artifact{ArtifactID: id, Name: name, Parts: []tasks.Part{d}})
	}
	return out
}

// ConfirmationNote is the status note of a task whose action waits for an
// operator.
func ConfirmationNote(res *executor.Result) string {
	return fmt.Sprintf("confirmation needed for action %s: %s", res.ActionID, res.Reason)
}
