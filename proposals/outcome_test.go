package proposals

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/snap"
)

func TestArtifacts(t *testing.T) {
	tests := []struct {
		name  string
		res   *executor.Result
		ids   []string
		media string
		names []string // the artifacts' names, where the case checks them
	}{
		{"nothing", &executor.Result{Outcome: executor.Completed, ActionID: "a"}, nil, "", nil},
		{"output", &executor.Result{Outcome: executor.Completed, ActionID: "a", Action: "READ_FILE", Output: json.RawMessage(`{"status":"success"}`)},
			[]string{"result-a"}, "", nil},
		{"output and diff", &executor.Result{Outcome: executor.Completed, ActionID: "a", Action: "WRITE_FILE",
			Output: json.RawMessage(`{"status":"success"}`), Diff: "+x\n"}, []string{"result-a", "diff-a"}, "text/x-diff", nil},
		{"diff to confirm", &executor.Result{Outcome: executor.NeedsConfirmation, ActionID: "a", Action: "WRITE_FILE", Diff: "+x\n"},
			[]string{"pending-"}, "text/x-diff", nil},
		{"named", &executor.Result{Outcome: executor.Completed, ActionID: "a", Action: "WRITE_FILE",
			Output: json.RawMessage(`{"status":"success"}`), Diff: "+x\n"}, []string{"result-a", "diff-a"}, "", []string{"result of WRITE_FILE", "changes made by WRITE_FILE"}},
		// A denied action's diff was never made: no "changes made by".
		{"denied", &executor.Result{Outcome: executor.Failed, ActionID: "a", Action: "WRITE_FILE",
			Output: json.RawMessage(`{"status":"error"}`), Diff: "+x\n"}, []string{"result-a"}, "", []string{"result of WRITE_FILE"}},
		// Data refused before its action was known: the id names it.
		{"refused data", &executor.Result{Outcome: executor.Failed, ActionID: "a",
			Output: json.RawMessage(`{"status":"error"}`)}, []string{"result-a"}, "", []string{"result of action a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arts := Artifacts(tt.res)
			if len(arts) != len(tt.ids) {
				t.Fatalf("%d artifacts; want %d", len(arts), len(tt.ids))
			}
			for i, a := range arts {
				if !strings.HasPrefix(a.ArtifactID, tt.ids[i]) || len(a.Parts) != 1 {
					t.Errorf("artifact %d: %+v", i, a)
				}
			}
			for i, name := range tt.names {
				if arts[i].Name != name {
					t.Errorf("artifact %d is named %q; want %q", i, arts[i].Name, name)
				}
			}
			if tt.media != "" && arts[len(arts)-1].Parts[0].MediaType != tt.media {
				t.Errorf("the diff's media type is %q", arts[len(arts)-1].Parts[0].MediaType)
			}
		})
	}
}

// The artifact of a diff waiting for confirmation is named by the action
// and the diff: writing the same wait again (a retried write, the
// reconcile after a write whose outcome was not learnt) adds nothing, as
// the task keeps one artifact per id, while an action held again with a
// new diff (its files changed before an approval) adds the new diff.
func TestPendingArtifactID(t *testing.T) {
	held := func(id, diff string) string {
		arts := Artifacts(&executor.Result{Outcome: executor.NeedsConfirmation, ActionID: id, Action: "WRITE_FILE", Diff: diff})
		if len(arts) != 1 {
			t.Fatalf("%d artifacts; want 1", len(arts))
		}
		if e := snap.CheckID("artifactId", arts[0].ArtifactID); e != nil {
			t.Fatalf("artifact id %q: %v", arts[0].ArtifactID, e)
		}
		return arts[0].ArtifactID
	}
	const action = "0b5a2c1e-7f3d-4c3a-9d5e-2f1a6b7c8d9e"
	first := held(action, "+x\n")
	if again := held(action, "+x\n"); again != first {
		t.Errorf("the same wait written twice: artifacts %s and %s; want one id", first, again)
	}
	if changed := held(action, "+y\n"); changed == first {
		t.Errorf("a new diff for the action has the old artifact's id %s", first)
	}
	if other := held("1c6b3d2f-8e4a-4d4b-8e6f-3a2b7c8d9e0f", "+x\n"); other == first {
		t.Errorf("another action's diff has the artifact id %s", first)
	}
}
