package executor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/testdb"
)

// FuzzRun feeds arbitrary bytes to Run as a proposal. Whatever they are, Run
// returns a Result and no error; a failure's output is a structured error, a
// success's the success output ({"status":"success",…}); the audit of the
// action starts with "received"; and a file beside the workspace is never
// touched.
func FuzzRun(f *testing.F) {
	seeds, err := filepath.Glob("testdata/seeds/*.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	v := newEnv(f, testdb.SQLite(f))
	v.file("a.txt", "hello world\n")
	canary := filepath.Join(filepath.Dir(v.dir), "canary.txt")
	if err := os.WriteFile(canary, []byte("canary\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "fuzz", Requester: agent, Data: data})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var out struct {
			Status string          `json:"status"`
			Action string          `json:"action"`
			Result json.RawMessage `json:"result"`
			Code   string          `json:"error_code"`
			Msg    string          `json:"message"`
		}
		switch res.Outcome {
		case executor.Failed:
			if err := json.Unmarshal(res.Output, &out); err != nil || out.Code == "" || out.Msg == "" {
				t.Fatalf("failed with output %s (%v)", res.Output, err)
			}
		case executor.Completed:
			if err := json.Unmarshal(res.Output, &out); err != nil || out.Status != "success" || out.Action == "" || out.Result == nil {
				t.Fatalf("completed with output %s (%v)", res.Output, err)
			}
		case executor.NeedsConfirmation:
			if res.Output != nil || res.Reason == "" {
				t.Fatalf("needs confirmation with output %s, reason %q", res.Output, res.Reason)
			}
		default:
			t.Fatalf("outcome %q", res.Outcome)
		}
		es, err := v.log.Query(context.Background(), audit.Filter{Action: res.ActionID})
		if err != nil || len(es) < 2 || es[0].Step != audit.StepReceived {
			t.Fatalf("audit entries %+v, %v", es, err)
		}
		if b, err := os.ReadFile(canary); err != nil || string(b) != "canary\n" {
			t.Fatalf("canary outside the workspace: %q, %v", b, err)
		}
	})
}
