package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// createNotes makes a table of the caller's own, written in the same
// transactions as the log's entries.
func createNotes(tb testing.TB, db *sqldb.DB) {
	tb.Helper()
	execSQL(tb, db, "CREATE TABLE IF NOT EXISTS notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL)")
}

func countNotes(tb testing.TB, db *sqldb.DB) int {
	tb.Helper()
	var n int
	if err := db.R.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM notes").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// writeNote writes note id and appends es in one transaction; rollback
// makes the transaction fail after both.
func writeNote(ctx context.Context, db *sqldb.DB, l *Log, id int, es []Entry, rollback bool) ([]Entry, error) {
	errRollback := errors.New("the caller changed its mind")
	var out []Entry
	err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = nil
		if _, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO notes (id, body) VALUES (?, ?)"), id, "note"); err != nil {
			return err
		}
		var err error
		if out, err = l.AppendTx(ctx, tx, es); err != nil {
			return err
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	if rollback && errors.Is(err, errRollback) {
		return nil, nil
	}
	return out, err
}

// AppendTx chains its entries after those of AppendBatch, commits them
// with the caller's row, and a rolled-back transaction leaves neither
// the row nor any entry: the chain verifies and goes on without a gap.
func TestAppendTx(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openDB(t, dsn)
		l := openLog(t, db, Options{})
		createNotes(t, db)
		got := fill(t, l, 2)

		out, err := writeNote(ctx, db, l, 1, []Entry{sample(2), sample(3), sample(4)}, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
		for i, e := range out {
			if e.Seq != int64(3+i) || !e.Time.Equal(out[0].Time) || e.Hash != Hash(e) {
				t.Errorf("entry %d: seq %d time %v hash %s", i, e.Seq, e.Time, e.Hash)
			}
		}
		if out[0].Prev != got[1].Hash || out[1].Prev != out[0].Hash {
			t.Error("AppendTx's entries are not chained to the log")
		}
		if n := countNotes(t, db); n != 1 {
			t.Fatalf("%d notes after a commit, want 1", n)
		}

		// Rolled back after AppendTx: no row, no entry, the head where it was.
		if _, err := writeNote(ctx, db, l, 2, []Entry{sample(5), sample(6)}, true); err != nil {
			t.Fatal(err)
		}
		if n := countNotes(t, db); n != 1 {
			t.Fatalf("%d notes after a rollback, want 1", n)
		}
		if h, err := l.Head(ctx); err != nil || h != (Anchor{5, got[4].Hash}) {
			t.Fatalf("Head after a rollback = %v, %v; want {5 %s}", h, err, got[4].Hash)
		}
		if rep, err := l.Verify(ctx); err != nil || rep.Entries != 5 {
			t.Fatalf("Verify after a rollback = %+v, %v", rep, err)
		}

		// The chain goes on from the last committed entry.
		e, err := l.Append(ctx, sample(7))
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != 6 || e.Prev != got[4].Hash {
			t.Fatalf("entry after the rollback: seq %d prev %s", e.Seq, e.Prev)
		}
		stored, err := l.Query(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if !equalEntries(stored, append(got, e)) {
			t.Fatalf("stored\n%+v\nwant\n%+v", stored, append(got, e))
		}

		// No entries: nothing to do, the caller's row still commits.
		if out, err := writeNote(ctx, db, l, 3, nil, false); err != nil || out != nil {
			t.Fatalf("empty AppendTx = %v, %v", out, err)
		}
		if h, _ := l.Head(ctx); h.Seq != 6 {
			t.Fatalf("head at %d after an empty AppendTx, want 6", h.Seq)
		}
	})
}

// AppendTx refuses what AppendBatch refuses, before writing anything, and
// a transaction that is not of the log's database.
func TestAppendTxRefused(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.SQLite(t)
	db := openDB(t, dsn)
	l := openLog(t, db, Options{})
	createNotes(t, db)
	fill(t, l, 1)
	bad := sample(1)
	bad.Step = "exploded"
	pruned := sample(1)
	pruned.Step = StepPruned
	for _, tc := range []struct {
		name string
		es   []Entry
		is   error
	}{
		{"invalid step", []Entry{sample(1), bad}, ErrInvalidEntry},
		{"pruned", []Entry{pruned}, ErrInvalidEntry},
		{"over MaxBatch", make([]Entry, MaxBatch+1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := l.AppendTx(ctx, tx, tc.es)
				return err
			})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("AppendTx = %v, want an error (%v)", err, tc.is)
			}
		})
	}

	// A second handle on the same file, as another process would have:
	// its transactions are not the log's.
	other := openDB(t, dsn)
	err := other.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := l.AppendTx(ctx, tx, []Entry{sample(1)})
		return err
	})
	if err == nil {
		t.Fatal("AppendTx took a transaction of another database")
	}
	if rep, err := l.Verify(ctx); err != nil || rep.Entries != 1 {
		t.Fatalf("Verify after the refusals = %+v, %v; want the 1 entry", rep, err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := l.AppendTx(ctx, tx, []Entry{sample(1)})
		return err
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("AppendTx after Close: %v", err)
	}
}

// AppendBatch (combined) and AppendTx (some rolled back) from two
// databases on one PostgreSQL schema or SQLite file, as two processes
// would: one gapless chain of exactly the committed entries.
func TestAppendTxConcurrent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		dbs := []*sqldb.DB{openDB(t, dsn), openDB(t, dsn)}
		logs := []*Log{openLog(t, dbs[0], Options{}), openLog(t, dbs[1], Options{})}
		createNotes(t, dbs[0])
		const workers, each = 3, 40
		var (
			mu        sync.Mutex
			got       []Entry
			committed int
			wg        sync.WaitGroup
		)
		keep := func(es []Entry) {
			// One call's entries are consecutive; checkOneChain checks
			// they are what was stored.
			if len(es) != 2 || es[1].Seq != es[0].Seq+1 || es[1].Prev != es[0].Hash {
				t.Errorf("one call's entries are not consecutive: %+v", es)
			}
			mu.Lock()
			got = append(got, es...)
			mu.Unlock()
		}
		for n, l := range logs {
			db := dbs[n]
			for w := range workers {
				wg.Go(func() { // AppendBatch, combined with the others
					for i := range each {
						a, b := sample(i), sample(i+1)
						a.Actor, b.Actor = fmt.Sprintf("batch-%d/%d", n, w), fmt.Sprintf("batch-%d/%d", n, w)
						out, err := l.AppendBatch(ctx, []Entry{a, b})
						if err != nil {
							t.Error(err)
							return
						}
						keep(out)
					}
				})
				wg.Go(func() { // AppendTx, every third rolled back
					for i := range each {
						e := sample(i)
						e.Actor = fmt.Sprintf("tx-%d/%d", n, w)
						id := (n*workers+w)*each + i
						rollback := i%3 == 2
						out, err := writeNote(ctx, db, l, id, []Entry{e, sample(i + 2)}, rollback)
						if err != nil {
							t.Error(err)
							return
						}
						if !rollback {
							keep(out)
							mu.Lock()
							committed++
							mu.Unlock()
						}
					}
				})
			}
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		checkOneChain(t, logs[0], len(logs)*workers*each*2+committed*2, got)
		if n := countNotes(t, dbs[0]); n != committed {
			t.Fatalf("%d notes, want the %d committed", n, committed)
		}
	})
}
