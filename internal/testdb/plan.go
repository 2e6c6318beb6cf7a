package testdb

import (
	"database/sql"
	"errors"
	"testing"
)

// QueryPlan returns the steps of SQLite's plan for query on db (the
// detail column of EXPLAIN QUERY PLAN), one a step: a test asserts that a
// query reads the index it was written for, and sorts nothing.
func QueryPlan(t testing.TB, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return plan
}
