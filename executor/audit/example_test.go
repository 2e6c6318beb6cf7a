package audit_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/sqldb"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// The node opens one database and gives it to the task store and the
	// audit log; "postgres://…" would share it between nodes.
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "snapnode.db"), sqldb.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	clock := func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }
	log, err := audit.New(ctx, db, audit.Options{Now: clock, Retain: 90 * 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	// The steps of one WRITE_FILE proposal.
	proposer, action := "bc1pproposer", "0190f3a2-7c4e-7a1b-9f1e-2b6c8d0e4f11"
	for _, e := range []audit.Entry{
		{Actor: proposer, Task: "task-1", Action: action, Step: audit.StepReceived},
		{Actor: "host", Task: "task-1", Action: action, Step: audit.StepJudged, Decision: "promote",
			Reason: "MEDIUM risk, permitted by policy", PolicyVersion: "policy-1"},
		{Actor: "host", Task: "task-1", Action: action, Step: audit.StepPromoted,
			PostHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Detail:   []byte(`{"path": "/sandbox/notes.md", "bytes": 4}`)},
	} {
		got, err := log.Append(ctx, e)
		if err != nil {
			panic(err)
		}
		fmt.Println(got.Seq, got.Step, got.Hash[:16])
	}
	report, err := log.Verify(ctx)
	fmt.Println("verified", report.Entries, "entries, head", report.Head.Seq, err)

	// The export verifies offline.
	var export bytes.Buffer
	if err := log.Export(ctx, &export, 0); err != nil {
		panic(err)
	}
	report, err = audit.VerifyJSONL(&export)
	fmt.Println("export verified", report.Entries, "entries", err)

	// Someone with access to the database changes a decision.
	if _, err := db.W.ExecContext(ctx, "UPDATE audit_log SET decision = 'block' WHERE seq = 2"); err != nil {
		panic(err)
	}
	_, err = log.Verify(ctx)
	var bad *audit.VerifyError
	if errors.As(err, &bad) {
		fmt.Println(errors.Is(err, audit.ErrTampered), "entry", bad.Seq, bad.Kind)
	}
	// Output:
	// 1 received d616ff0d22309c48
	// 2 judged f4b6acf5ac49451e
	// 3 promoted 87b52f56531247fc
	// verified 3 entries, head 3 <nil>
	// export verified 3 entries <nil>
	// true entry 2 edited
}

// A component that keeps rows of its own in the log's database writes
// them and their audit entries in one transaction: one commit, and
// neither without the other.
func ExampleLog_AppendTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "snapnode.db"), sqldb.Options{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	if _, err := db.W.ExecContext(ctx, "CREATE TABLE actions (id TEXT PRIMARY KEY, state TEXT)"); err != nil {
		panic(err)
	}

	record := func(id string, fail bool) error {
		return db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO actions VALUES (?, 'promoting')", id); err != nil {
				return err
			}
			// Last in the transaction: the head of the chain stays locked
			// (on PostgreSQL) until the commit.
			if _, err := log.AppendTx(ctx, tx, []audit.Entry{
				{Actor: "bc1pproposer", Action: id, Step: audit.StepReceived},
				{Actor: "bc1pproposer", Action: id, Step: audit.StepSandboxed, Decision: "staged"},
			}); err != nil {
				return err
			}
			if fail {
				return errors.New("something went wrong before the commit")
			}
			return nil
		})
	}
	fmt.Println(record("a1", false))
	fmt.Println(record("a2", true))
	report, err := log.Verify(ctx)
	fmt.Println("verified", report.Entries, "entries", err)
	// Output:
	// <nil>
	// something went wrong before the commit
	// verified 2 entries <nil>
}
