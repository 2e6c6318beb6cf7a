package proposals

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/tasks"
)

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
