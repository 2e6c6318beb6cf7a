package proposals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/tasks"
)

// Artifacts are what an executor result leaves on its task: the runtime
// output (the executor's success output or structured error) as a data part,
// and the diff of the changes as text. While an action waits for
// confirmation the diff to confirm is left instead, named by the action
// and the diff (pendingID). The proposals of a peer and of the agent leave
// the same artifacts.
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
			id, name = pendingID(res.ActionID, res.Diff), "changes awaiting confirmation of action "+res.ActionID
		}
		d := tasks.TextPart(res.Diff)
		d.MediaType = "text/x-diff"
		out = append(out, tasks.Artifact{ArtifactID: id, Name: name, Parts: []tasks.Part{d}})
	}
	return out
}

// pendingID names the artifact of a diff waiting for confirmation. A task
// keeps one artifact per id, so the same wait written twice (a retried
// write, the reconcile after a write whose outcome was not learnt) leaves
// one artifact, while an action held again with a new diff (its files
// changed before an approval, see executor.Executor.ApproveThen) leaves
// the new diff beside the old. A hash keeps the id within SNAP's 128
// characters whatever the action id.
func pendingID(actionID, diff string) string {
	h := sha256.New()
	h.Write([]byte(actionID))
	h.Write([]byte{0})
	h.Write([]byte(diff))
	return "pending-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// ConfirmationNote is the status note of a task whose action waits for an
// operator.
func ConfirmationNote(res *executor.Result) string {
	return fmt.Sprintf("confirmation needed for action %s: %s", res.ActionID, res.Reason)
}
