package sqlstore

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// TestPrunePlan checks that SQLite reads Prune's batch from the partial
// index of ended tasks, in status order, rather than every ended task
// through tasks_state and a sort (which on a million tasks held the
// writer for tens of seconds a batch). Ties of status time are put in id
// order by sorting each group of equal times alone ("FOR LAST TERM OF
// ORDER BY"), never the whole set.
func TestPrunePlan(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	plan := testdb.QueryPlan(t, s.r, pruneQuery("sqlite"), int64(1), 1000)
	all := strings.Join(plan, "\n")
	whole := strings.ReplaceAll(all, "TEMP B-TREE FOR LAST TERM OF ORDER BY", "")
	if !strings.Contains(all, "tasks_terminal") || strings.Contains(whole, "TEMP B-TREE") {
		t.Fatalf("Prune's plan:\n%s\nwant the subquery to search tasks_terminal, with no sort", all)
	}
}

// TestCountLivePlan checks that SQLite reads the live tasks' count (at
// start, and at each RecountLive) from the index on state, the live
// tasks' rows only, rather than every task kept.
func TestCountLivePlan(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	all := strings.Join(testdb.QueryPlan(t, s.r, countLiveQuery), "\n")
	if !strings.Contains(all, "SEARCH tasks USING INDEX tasks_state") {
		t.Fatalf("the count's plan:\n%s\nwant a search of tasks_state", all)
	}
}

// TestFindByKeyPlan checks that SQLite finds the task an idempotency key
// created through the partial index of keyed tasks: without the query
// saying the key is not empty (the index's condition), the planner could
// not use it and read every task of the owner through tasks_owner, at
// each message/send whose key the service had not seen.
func TestFindByKeyPlan(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	all := strings.Join(testdb.QueryPlan(t, s.r, byKeyQuery, "o", "k", "o", "k"), "\n")
	if !strings.Contains(all, "SEARCH tasks USING INDEX tasks_idempotency (owner=? AND idempotency_key=?)") ||
		!strings.Contains(all, "SEARCH task_keys USING PRIMARY KEY (owner=? AND idem_key=?)") {
		t.Fatalf("the key's plan:\n%s\nwant searches of tasks_idempotency and task_keys' key", all)
	}
}
