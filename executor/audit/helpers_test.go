package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testclock"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// clock is the tests' settable clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)) }

// openDB opens dsn and closes it when the test ends.
func openDB(tb testing.TB, dsn string) *sqldb.DB {
	tb.Helper()
	db, err := sqldb.Open(context.Background(), dsn, sqldb.Options{})
	if err != nil {
		tb.Fatalf("sqldb.Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("db.Close: %v", err)
		}
	})
	return db
}

// openLog opens a log on db, closed when the test ends.
func openLog(tb testing.TB, db *sqldb.DB, opts Options) *Log {
	tb.Helper()
	l, err := New(context.Background(), db, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

// sample is the i-th entry of the tests' logs: every field set, the file
// hashes and detail on some.
func sample(i int) Entry {
	e := Entry{
		Actor:         "bc1pproposer" + fmt.Sprint(i%3),
		Task:          fmt.Sprintf("task-%d", i/4),
		Action:        fmt.Sprintf("0190f3a2-0000-7000-8000-%012d", i/2),
		Step:          []Step{StepReceived, StepValidated, StepJudged, StepSandboxed, StepPromoted}[i%5],
		Decision:      []string{"", "", "promote", "", "done"}[i%5],
		Reason:        fmt.Sprintf("step %d\nof the test", i),
		PolicyVersion: "policy-v3",
	}
	if i%2 == 1 {
		e.PreHash = strings.Repeat("a", 63) + fmt.Sprint(i%10)
		e.PostHash = strings.Repeat("b", 63) + fmt.Sprint(i%10)
	}
	if i%3 == 0 {
		e.Detail = json.RawMessage(fmt.Sprintf(`{ "path": "/sandbox/notes-%d.md", "bytes": %d, "note": "<é & \u00e9>" }`, i, i*10))
	}
	return e
}

// fill appends sample(0…n-1) and returns them as stored.
func fill(tb testing.TB, l *Log, n int) []Entry {
	tb.Helper()
	out := make([]Entry, 0, n)
	for i := range n {
		e, err := l.Append(context.Background(), sample(i))
		if err != nil {
			tb.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

// execSQL runs statements (with ? placeholders) on db, outside the log.
func execSQL(tb testing.TB, db *sqldb.DB, stmts ...string) {
	tb.Helper()
	for _, q := range stmts {
		if _, err := db.W.ExecContext(context.Background(), db.Dialect.Rebind(q)); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// insertRow writes e into audit_log as it is, as a forger would.
func insertRow(tb testing.TB, db *sqldb.DB, e Entry) {
	tb.Helper()
	q := db.Dialect.Rebind("INSERT INTO audit_log (" + entryColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	if _, err := db.W.ExecContext(context.Background(), q, insertArgs(e)...); err != nil {
		tb.Fatalf("insert forged row: %v", err)
	}
}

var _ = testdb.Each
