package audit

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// A task's newest entries come in Seq order, the last Limit of its
// trail, and Count says how many came before them, among the entries of
// other tasks interleaved with it.
func TestQueryNewestAndCount(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		l := openLog(t, openDB(t, dsn), Options{})
		var long []Entry // task "long"'s entries, as stored
		for i := range 3000 / MaxBatch {
			batch := make([]Entry, MaxBatch)
			for j := range batch {
				e := sample(i*MaxBatch + j)
				if j%3 != 0 {
					e.Task = "long"
				}
				batch[j] = e
			}
			out, err := l.AppendBatch(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range out {
				if e.Task == "long" {
					long = append(long, e)
				}
			}
		}
		const n = 200
		got, err := l.Query(ctx, Filter{Task: "long", Newest: true, Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		if !equalEntries(got, long[len(long)-n:]) {
			t.Fatalf("newest %d: %d entries, seqs %v…, want %d from seq %d", n, len(got), seqsOf(got[:min(3, len(got))]), n, long[len(long)-n].Seq)
		}
		earlier, err := l.Count(ctx, Filter{Task: "long", BeforeSeq: got[0].Seq})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(long) - n); earlier != want {
			t.Errorf("count before seq %d: %d, want %d", got[0].Seq, earlier, want)
		}
		if all, err := l.Count(ctx, Filter{Task: "long"}); err != nil || all != int64(len(long)) {
			t.Errorf("count of the task: %d, %v; want %d", all, err, len(long))
		}
		// Newest pages back with BeforeSeq, and a short trail is whole.
		prev, err := l.Query(ctx, Filter{Task: "long", Newest: true, Limit: n, BeforeSeq: got[0].Seq})
		if err != nil || !equalEntries(prev, long[len(long)-2*n:len(long)-n]) {
			t.Errorf("the page before: %d entries, %v", len(prev), err)
		}
		short, err := l.Query(ctx, Filter{Task: long[0].Task, Action: long[0].Action, Newest: true, Limit: n})
		if err != nil || len(short) == 0 || short[0].Seq != long[0].Seq {
			t.Errorf("a short trail: %v, %v", seqsOf(short), err)
		}
		// The whole log's newest.
		if tail, err := l.Query(ctx, Filter{Newest: true, Limit: 2}); err != nil || len(tail) != 2 || tail[0].Seq != 2999 || tail[1].Seq != 3000 {
			t.Errorf("the log's newest 2: %v, %v", seqsOf(tail), err)
		}
	})
}

func seqsOf(es []Entry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// On SQLite, a task's or an action's entries are read in their index,
// not by scanning the log: the indexes are partial (on a task or action not empty), which
// SQLite uses only when the query says so.
func TestQueryUsesIndexSQLite(t *testing.T) {
	db := openDB(t, testdb.SQLite(t))
	openLog(t, db, Options{})
	for _, f := range []Filter{{Task: "t"}, {Task: "t", Newest: true}, {Action: "a"}, {Task: "t", BeforeSeq: 9}} {
		where, args := f.where()
		for _, q := range []string{"SELECT " + entryColumns + " FROM audit_log" + where + " ORDER BY seq DESC", "SELECT COUNT(*) FROM audit_log" + where} {
			p := strings.Join(testdb.QueryPlan(t, db.R, q, args...), "; ")
			if !strings.Contains(p, "INDEX audit_log_") || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("%+v: plan %q, want a search in the task's or action's index", f, p)
			}
		}
	}
}
