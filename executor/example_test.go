package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// An agent writes a file, which the default policy permits, then asks to
// delete it, which an operator must confirm.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "executor-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "sandbox"), 0o755); err != nil {
		panic(err)
	}

	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "snapnode.db"), sqldb.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	sb, err := sandbox.Open(filepath.Join(dir, "sandbox"), sandbox.DefaultLimits())
	if err != nil {
		panic(err)
	}
	defer sb.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	const agent, operator = "bc1pagent", "bc1poperator"
	holder := &policy.Holder{}
	holder.Set(policy.InForce{Engine: policy.Default(), Operator: policy.Operators([]string{operator})})
	ex, err := executor.New(ctx, executor.Config{DB: db, Sandbox: sb, Policy: holder, Audit: log})
	if err != nil {
		panic(err)
	}

	res, err := ex.Run(ctx, executor.Request{TaskID: "t1", Requester: agent, Data: []byte(`{
		"schema_version": "1.0.1", "id": "3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b",
		"reasoning": "I need to save the log", "action": "WRITE_FILE",
		"args": {"path": "/sandbox/log.txt", "content": "Hello World!\n"}}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, string(res.Output))
	fmt.Print(res.Diff)

	res, err = ex.Run(ctx, executor.Request{TaskID: "t2", Requester: agent, Data: []byte(`{
		"schema_version": "1.0.1", "id": "3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6c",
		"reasoning": "the log is no longer needed", "action": "DELETE_FILE",
		"args": {"path": "/sandbox/log.txt"}}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome)
	pending, err := ex.Pending(ctx, "t2") // snapnode approve t2
	if err != nil {
		panic(err)
	}
	res, err = ex.Approve(ctx, pending[0].ActionID, operator)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, string(res.Output))

	report, err := log.Verify(ctx)
	fmt.Println("audit entries:", report.Entries, "verified:", err == nil)
	// Output:
	// completed {"status":"success","action":"WRITE_FILE","result":{"path":"/sandbox/log.txt","size":13,"sha256":"03ba204e50d126e4674c005e04d82e84c21366780af1f43bd54a37816b6ab340"}}
	// --- /dev/null
	// +++ /sandbox/log.txt
	// @@ -0,0 +1 @@
	// +Hello World!
	// needs_confirmation
	// completed {"status":"success","action":"DELETE_FILE","result":{"path":"/sandbox/log.txt"}}
	// audit entries: 13 verified: true
}
