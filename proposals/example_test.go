package proposals_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// A peer's task proposes to delete a file, which the default policy holds
// for an operator: the task waits, input-required, its action listed by
// Held; the operator approves it by id, the file is deleted and the task
// completes. A second decision on it is refused: the task has ended.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "proposals-example")
	defer os.RemoveAll(dir)
	box := filepath.Join(dir, "sandbox")
	os.Mkdir(box, 0o700)
	os.WriteFile(filepath.Join(box, "old.txt"), []byte("old\n"), 0o600)

	// The executor and the task store share one database.
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "snapnode.db"), sqldb.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	sb, _ := sandbox.Open(box, sandbox.DefaultLimits())
	defer sb.Close()
	log, _ := audit.New(ctx, db, audit.Options{})
	defer log.Close()
	exec, err := executor.New(ctx, executor.Config{DB: db, Sandbox: sb, Policy: policy.NewHolder(policy.Default()), Audit: log})
	if err != nil {
		panic(err)
	}
	store, _ := sqlstore.New(ctx, db)

	// The Runner, the task service on it, and Proposals on the service.
	svc := tasks.NewService(store, tasks.ServiceOptions{Runner: proposals.NewRunner(exec, nil, nil)})
	props, err := proposals.New(proposals.Config{Executor: exec, Tasks: svc, Claims: proposals.DBClaims(db)})
	if err != nil {
		panic(err)
	}

	task, err := svc.SendMessage(ctx, "bc1palice", &tasks.SendParams{Message: tasks.Message{MessageID: "m-1", Role: tasks.RoleUser,
		Parts: []tasks.Part{tasks.DataPart([]byte(`{"schema_version":"1.0.0","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b",
			"reasoning":"old.txt is no longer needed","action":"DELETE_FILE","args":{"path":"/sandbox/old.txt"}}`))}}})
	if err != nil {
		panic(err)
	}
	held, _ := props.Held(ctx, task.ID)
	fmt.Println(task.Status.State, len(held), held[0].Action)

	// snapnode approve, the console and an operator's signed message all come here.
	d := proposals.Decision{TaskID: task.ID, ActionID: held[0].ActionID, Approver: executor.Host, Approve: true}
	task, err = props.Decide(ctx, d)
	_, statErr := os.Stat(filepath.Join(box, "old.txt"))
	fmt.Println(task.Status.State, err, errors.Is(statErr, os.ErrNotExist))

	_, err = props.Decide(ctx, d)
	fmt.Println(errors.Is(err, proposals.ErrTaskEnded))
	// Output:
	// input_required 1 DELETE_FILE
	// completed <nil> true
	// true
}
