package executor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// An action held for an operator longer than the audit log's retention
// keeps its whole story: pruning stops before the first entry of an
// action still open (held, or being approved, promoted or rolled back),
// so that its decision, when it comes, follows its received … held
// entries in the log; once decided, the next prune drops them with the
// rest. Before, the retention dropped them by age, and the action's
// story began with its decision.
func TestPruneKeepsOpenActions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.retain = 30 * 24 * time.Hour
		v.reopen()
		ctx := context.Background()
		v.file("old.txt", "old\n")
		v.file("a.txt", "keep me\n")
		done := v.run(agent, prop("READ_FILE", map[string]string{"path": "/sandbox/old.txt"}))
		wantOutcome(t, done, executor.Completed)
		held := v.run(agent, prop("RENAME_FILE", map[string]string{"source": "/sandbox/a.txt", "destination": "/sandbox/b.md"}))
		wantOutcome(t, held, executor.NeedsConfirmation)
		before := v.steps(held.ActionID)
		v.clock.Advance(40 * 24 * time.Hour)
		v.file("new.txt", "new\n")
		v.run(agent, prop("READ_FILE", map[string]string{"path": "/sandbox/new.txt"}))

		if _, err := v.log.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if got := v.steps(done.ActionID); len(got) != 0 {
			t.Errorf("the ended action's entries past retention are kept: %v", got)
		}
		if got := v.steps(held.ActionID); !slices.Equal(got, before) {
			t.Fatalf("the held action's entries after the prune: %v; want %v", got, before)
		}
		if _, err := v.ex.Deny(ctx, held.ActionID, operator, "not now"); err != nil {
			t.Fatal(err)
		}
		if got := v.steps(held.ActionID); !slices.Equal(got, append(before, "denied")) {
			t.Fatalf("the denied action's story: %v; want %v then denied", got, before)
		}
		v.verify()

		// Decided, its entries are pruned as any others once their
		// time is up: the denial's too, 30 days on.
		v.clock.Advance(31 * 24 * time.Hour)
		if _, err := v.log.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if got := v.steps(held.ActionID); len(got) != 0 {
			t.Errorf("the decided action's entries past retention are kept: %v", got)
		}
		v.verify()
	})
}
