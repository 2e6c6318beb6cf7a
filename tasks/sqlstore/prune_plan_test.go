package sqlstore

import (
	"context"
	"strings"
	"testing"
)

// TestPrunePlan checks that SQLite reads Prune's batch from the partial
// index of ended tasks, in status order, rather than every ended task
// through tasks_state and a sort (which on a million tasks held the
// writer for tens of seconds a batch).
func TestPrunePlan(t *testing.T) {
	s := open(t, sqliteDSN(t), Options{})
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+pruneQuery("sqlite"), int64(1), 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "\n")
	if !strings.Contains(all, "tasks_terminal") || strings.Contains(all, "TEMP B-TREE") {
		t.Fatalf("Prune's plan:\n%s\nwant the subquery to search tasks_terminal, with no sort", all)
	}
}
