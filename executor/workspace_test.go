package executor_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// The workspace folder deleted under a running node: an action fails with
// EXECUTION_FAILED, cause no_workspace (not "the file does not exist", and
// nothing is written into the deleted folder); made again, the folder is
// used by the next action, without a restart.
func TestWorkspaceDeletedAndRecreated(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "hello world\n")
	write := func(id, content string) *executor.Result {
		return v.run(agent, []byte(`{"schema_version": "1.4.0", "id": "`+id+`", "reasoning": "note", "action": "WRITE_FILE",
			"args": {"path": "/sandbox/a.txt", "content": "`+content+`\n"}}`))
	}
	if err := os.RemoveAll(v.dir); err != nil {
		t.Fatal(err)
	}
	res := write("9d2c4b7a-1e3f-4a5b-8c6d-0e1f2a3b4c51", "lost")
	var f executor.Failure
	if res.Outcome != executor.Failed || json.Unmarshal(res.Output, &f) != nil ||
		f.Code != executor.CodeExecutionFailed || f.Cause != "no_workspace" {
		t.Fatalf("with the folder deleted: %s %s, want EXECUTION_FAILED, cause no_workspace", res.Outcome, res.Output)
	}
	if err := os.Mkdir(v.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v.file("a.txt", "made again\n")
	if res := write("9d2c4b7a-1e3f-4a5b-8c6d-0e1f2a3b4c52", "kept"); res.Outcome != executor.Completed {
		t.Fatalf("after the folder was made again: %s %s", res.Outcome, res.Output)
	}
	if got, _ := v.content("a.txt"); got != "kept\n" {
		t.Fatalf("a.txt = %q, want the write in the new folder", got)
	}
	v.verify()
}
