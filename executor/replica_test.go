package executor_test

import (
	"context"
	"database/sql"
	"runtime"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestReplicaStartsDuringPromotion: two executors on one PostgreSQL
// database and one workspace folder, as two replicas of a node. While
// the first promotes a write (its new content written ahead, the record
// being committed "promoting"), the second starts and sweeps the sandbox,
// as a node does at start. The write is promoted all the same, and the
// workspace, the record and the audit log agree.
func TestReplicaStartsDuringPromotion(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newEnv(t, dsn)
	a.file("a.txt", "before\n")
	b := &env{t: t, dsn: dsn, dir: a.dir, clock: a.clock, holder: a.holder, cooldown: a.cooldown, defaults: a.defaults}
	const content = "after\n"
	also := func(ctx context.Context, _ *sql.Tx) error {
		// Bounded, as in TestPromotionWritesAhead: wait for the content
		// written ahead, then start the second replica.
		deadline := time.Now().Add(10 * time.Second)
		for aheadFile(t, a.dir, content) == "" && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		b.open()
		t.Cleanup(b.close)
		if n, err := b.sb.Sweep(ctx); err != nil || n != 0 {
			t.Errorf("the second replica's Sweep = %d, %v; want nothing removed", n, err)
		}
		return nil
	}
	res, err := a.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent,
		Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": content}), Also: also})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, res, executor.Completed)
	if c, _ := a.content("a.txt"); c != content {
		t.Fatalf("a.txt = %q", c)
	}
	if left := aheadFile(t, a.dir, ""); left != "" {
		t.Fatalf("temporary file left behind: %s", left)
	}
	a.verify()
	b.verify()
}
