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
// and the diff of the changes made as text. While an action waits for
// confirmation the diff to confirm is left instead, named by the action
// and the diff (pendingID), until Settled takes its place. The proposals
// of a peer and of the agent leave the same artifacts.
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
	switch {
	case res.Diff == "":
	case res.Outcome == executor.Completed:
		out = append(out, tasks.Artifact{ArtifactID: "diff-" + res.ActionID, Name: "changes made by " + res.Action,
			Parts: []tasks.Part{diffPart(res.Diff)}})
	case res.Outcome == executor.NeedsConfirmation:
		out = append(out, tasks.Artifact{ArtifactID: pendingID(res.ActionID, res.Diff),
			Name: "changes awaiting confirmation of action " + res.ActionID, Parts: []tasks.Part{diffPart(res.Diff)}})
	}
	// A failed action's diff (a denied one's) was never made: Settled
	// says what became of it.
	return out
}

func diffPart(diff string) tasks.Part {
	d := tasks.TextPart(diff)
	d.MediaType = "text/x-diff"
	return d
}

// How held changes were settled (Settled).
const (
	// SettledApproved: an operator approved the action; the result says
	// whether it ran.
	SettledApproved = "approved"
	// SettledDenied: an operator denied it.
	SettledDenied = "denied"
	// SettledWithdrawn: it was withdrawn before anyone decided (the
	// requester of an agent's job wrote again).
	SettledWithdrawn = "withdrawn"
)

// Settled is the artifact that takes the place of the one a held action's
// changes were shown in, "changes awaiting confirmation of action …" (the
// same id: pendingID of actionID and diff, the diff held), once the
// action is decided: how is SettledApproved, SettledDenied or
// SettledWithdrawn, and res the decision's result. Its name ends with
// what became of the changes: ", applied" (an approval carried out: its
// diff is kept), ", denied", ", withdrawn", ", not applied" (approved,
// and the action failed), ", superseded" (approved, and held again with
// a new diff: its files changed). Its first part says so in a sentence;
// who decided is not named, as the task's notes never name an operator.
func Settled(actionID, diff string, res *executor.Result, how string) tasks.Artifact {
	id := pendingID(actionID, diff)
	var end, say string
	switch {
	case how == SettledWithdrawn:
		end, say = "withdrawn", "These changes were withdrawn before an operator decided on them: they were not applied."
	case how != SettledApproved:
		end, say = "denied", "An operator denied these changes: they were not applied."
	case res.Outcome == executor.Completed:
		end, say = "applied", "An operator approved these changes, and they were applied."
	case res.Outcome == executor.NeedsConfirmation:
		end, say = "superseded", "An operator approved these changes, but the files they touch changed before they were applied: nothing was applied, and the new diff awaits confirmation."
	default:
		end, say = "not applied", "An operator approved these changes, but the action failed: they were not applied."
	}
	note := tasks.TextPart(say)
	note.MediaType = "text/plain"
	parts := []tasks.Part{note}
	if end == "applied" {
		parts = append(parts, diffPart(diff))
	}
	return tasks.Artifact{ArtifactID: id, Name: "changes of action " + actionID + ", " + end, Parts: parts}
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
