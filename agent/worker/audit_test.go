package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A violation is audited whatever the worker wrote: the audit log refuses
// a reason with control characters (a terminal's colours, a NUL), which a
// worker's error output can carry.
func TestViolationWithControlCharactersIsAudited(t *testing.T) {
	for _, c := range []struct{ script, rule, want string }{
		{"crashcolor.py", "crash", "worker: out of ideas"},
	} {
		t.Run(c.script, func(t *testing.T) {
			ctx := context.Background()
			db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			log, err := audit.New(ctx, db, audit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { log.Close() })
			p, _, _ := pool(t, c.script, func(cfg *worker.Config) { cfg.Audit = log })
			_, err = p.Complete(ctx, prompt("job-1", 0, ""))
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "("+c.rule+")") {
				t.Fatalf("err = %v; want agent.ErrWorkerFailed with %q (%s)", err, c.want, c.rule)
			}
			es, err := log.Query(ctx, audit.Filter{Task: "job-1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 || es[0].Decision != "worker_stopped" || !strings.Contains(es[0].Reason, c.want) {
				t.Fatalf("audit: %+v; want the violation recorded", es)
			}
		})
	}
}
