package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/testdb"
)

func TestPruneRetain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		db := openDB(t, dsn)
		l := openLog(t, db, Options{Now: clk.Now, Retain: time.Hour})
		l.pruneChunk = 7
		var es []Entry
		for i := range 30 {
			e, err := l.Append(ctx, sample(i))
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
			clk.Advance(5 * time.Minute)
		}
		// Now is 150 min after the first entry: those of the first 90
		// minutes (seq 1…18) are due, in chunks of 7, 7 and 4.
		n, err := l.Prune(ctx)
		if err != nil || n != 18 {
			t.Fatalf("Prune removed %d, %v; want 18", n, err)
		}
		left, err := l.Query(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 15 || left[0].Seq != 19 {
			t.Fatalf("%d entries left from seq %d; want 12 and 3 pruning records from 19", len(left), left[0].Seq)
		}
		var firsts []int64
		for _, e := range left[12:] {
			var d prunedDetail
			if e.Step != StepPruned || e.Actor != "host" || jsonv2.Unmarshal(e.Detail, &d) != nil {
				t.Fatalf("entry %d is not a pruning record: %+v", e.Seq, e)
			}
			firsts = append(firsts, d.FirstSeq)
			if want := es[d.FirstSeq-2].Hash; d.FirstPrev != want {
				t.Errorf("pruning record %d: first_prev %s, want %s", e.Seq, d.FirstPrev, want)
			}
		}
		if fmt.Sprint(firsts) != "[8 15 19]" {
			t.Errorf("pruning records start the chain at %v, want [8 15 19]", firsts)
		}
		rep, err := l.Verify(ctx, Anchor{5, es[4].Hash}, Anchor{18, es[17].Hash}, Anchor{20, es[19].Hash})
		if err != nil {
			t.Fatal(err)
		}
		want := Report{Entries: 15, First: 19, Last: 33, Checkpoint: Anchor{18, es[17].Hash}, Head: Anchor{33, left[14].Hash},
			AnchorsChecked: 2, AnchorsPruned: 1, Unsealed: 15}
		if rep != want {
			t.Fatalf("Report %+v, want %+v", rep, want)
		}
		var buf bytes.Buffer
		if err := l.Export(ctx, &buf, 0); err != nil {
			t.Fatal(err)
		}
		if off, err := VerifyJSONL(bytes.NewReader(buf.Bytes()), Anchor{5, es[4].Hash}, Anchor{18, es[17].Hash}, Anchor{20, es[19].Hash}); err != nil || off != want {
			t.Fatalf("VerifyJSONL after pruning: %+v, %v", off, err)
		}
		// Nothing more is due: no new record.
		if n, err := l.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("second Prune removed %d, %v", n, err)
		}
		if h, _ := l.Head(ctx); h.Seq != 33 {
			t.Fatalf("head at %d after an idle prune", h.Seq)
		}
		// Moving the start further by hand shows.
		execSQL(t, db, "DELETE FROM audit_log WHERE seq = 19")
		setHead(t, db, "first_seq = 20, first_prev = '"+es[18].Hash+"'")
		_, err = l.Verify(ctx)
		checkVerdict(t, "start moved after pruning", err, KindHead, 20)
	})
}

// With MaxEntries the log holds that many entries after each prune, the
// pruning record included, and an idle prune changes nothing.
func TestPruneMaxEntries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		l := openLog(t, openDB(t, dsn), Options{MaxEntries: 10})
		fill(t, l, 25)
		for round := range 3 {
			if round == 2 { // the smallest limit: the pruning record alone
				l.opts.MaxEntries = 1
			}
			n, err := l.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := l.Verify(ctx)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if rep.Entries != l.opts.MaxEntries {
				t.Fatalf("round %d: %d entries after removing %d", round, rep.Entries, n)
			}
			if n, err := l.Prune(ctx); err != nil || n != 0 {
				t.Fatalf("round %d: idle prune removed %d, %v", round, n, err)
			}
			fill(t, l, 3+round)
		}
	})
}

// Pruning verifies what it drops: a changed entry in the range, or a
// broken link to the first entry kept, stops it, and nothing is dropped.
func TestPruneRefusesTampered(t *testing.T) {
	for _, c := range []struct {
		name string
		sql  string
		kind Kind
		seq  int64
	}{
		{"entry to drop edited", "UPDATE audit_log SET actor = 'x' WHERE seq = 3", KindEdited, 3},
		{"entry to drop deleted", "DELETE FROM audit_log WHERE seq = 7", KindMissing, 7},
		{"first entry kept unlinked", "UPDATE audit_log SET prev = '" + Genesis + "' WHERE seq = 16", KindEdited, 16},
		{"forged entry before the start", "UPDATE audit_log SET seq = -5 WHERE seq = 20", KindExtra, -5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, testdb.SQLite(t))
			l := openLog(t, db, Options{MaxEntries: 6})
			fill(t, l, 20)
			execSQL(t, db, c.sql)
			n, err := l.Prune(ctx)
			if n != 0 {
				t.Fatalf("removed %d", n)
			}
			checkVerdict(t, "Prune", err, c.kind, c.seq)
			var rows int
			if err := db.R.QueryRow("SELECT count(*) FROM audit_log").Scan(&rows); err != nil || rows < 19 {
				t.Fatalf("%d rows left, %v", rows, err)
			}
		})
	}
}

// Only a prefix goes: an old entry after a newer one (the clock set back)
// stays until those before it are due.
func TestPrunePrefixOnly(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Retain: time.Hour})
	fill(t, l, 1)          // t0
	clk.Advance(time.Hour) // t0+1h
	fill(t, l, 1)
	clk.Advance(-time.Hour) // back to t0
	fill(t, l, 1)
	clk.Advance(time.Hour + 30*time.Minute) // t0+1h30: entries 1 and 3 are older than an hour
	if n, err := l.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune removed %d, %v; want 1", n, err)
	}
	if rep, err := l.Verify(ctx); err != nil || rep.First != 2 || rep.Entries != 3 {
		t.Fatalf("after pruning: %+v, %v", rep, err)
	}
}

// Everything due: one pruning record is left, and it verifies.
func TestPruneAll(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Retain: time.Minute})
	es := fill(t, l, 5)
	clk.Advance(time.Hour)
	if n, err := l.Prune(ctx); err != nil || n != 5 {
		t.Fatalf("Prune removed %d, %v", n, err)
	}
	rep, err := l.Verify(ctx, Anchor{5, es[4].Hash}, Anchor{5, es[4].Hash})
	if err != nil || rep.Entries != 1 || rep.First != 6 || rep.Checkpoint != (Anchor{5, es[4].Hash}) || rep.AnchorsChecked != 2 {
		t.Fatalf("%+v, %v", rep, err)
	}
	// No retention configured: Prune does nothing.
	keep := openLog(t, l.db, Options{})
	if n, err := keep.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune without retention: %d, %v", n, err)
	}
}

func TestRunPruner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := newClock()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Retain: time.Minute})
	fill(t, l, 4)
	ticks := make(chan time.Time)
	pruned := make(chan int64)
	done := make(chan error, 1)
	go func() {
		done <- l.RunPruner(ctx, ticks, 0, func(n int64, err error) {
			if err != nil {
				t.Errorf("prune: %v", err)
			}
			pruned <- n
		})
	}()
	ticks <- clk.Now() // nothing is due yet
	if n := <-pruned; n != 0 {
		t.Fatalf("first prune removed %d, want 0", n)
	}
	clk.Advance(time.Hour)
	ticks <- clk.Now()
	if n := <-pruned; n != 4 {
		t.Fatalf("prune at the tick removed %d, want 4", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunPruner returned %v", err)
	}
}
