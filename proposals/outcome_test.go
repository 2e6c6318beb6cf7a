package proposals

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
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
