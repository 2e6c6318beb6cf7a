package audit

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// rewriteFrom rewrites the chain of db from entry from on, as someone
// who can write the database but has not the key does: each entry's
// reason changed (seals and pruning records kept as they are), every hash
// after it recomputed, the head record moved to the new last hash.
func rewriteFrom(t *testing.T, db *sqldb.DB, es []Entry, from int64) {
	t.Helper()
	prev := es[from-2].Hash
	for _, e := range es[from-1:] {
		if e.Step != StepSealed && e.Step != StepPruned {
			e.Reason = "rewritten"
		}
		e.Prev = prev
		e.Hash = Hash(e)
		replaceRow(t, db, e)
		prev = e.Hash
	}
	setHead(t, db, "last_hash = '"+prev+"'")
}

// all returns every entry of l.
func all(t *testing.T, l *Log) []Entry {
	t.Helper()
	es, err := l.Query(context.Background(), Filter{Limit: MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A seal signs the head with the node's key: Verify reports it and the
// entries after it, unsealed; a chain rewritten below it, every hash and
// the head record recomputed, fails at the seal, in the database and in
// an export (against the node's address); and a log another key sealed
// (another node's, swapped in) fails against this node's key. Before
// seals, both verified.
func TestSealCatchesRewrittenChain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		signer := testSigner(t, "11")
		db := openDB(t, dsn)
		l := openLog(t, db, Options{Now: clk.Now, Signer: signer})
		fill(t, l, 5)
		clk.Advance(time.Hour)
		s, err := l.Seal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		es := all(t, l)
		if s.Seq != 6 || s.Head != (Anchor{5, es[4].Hash}) || !s.Time.Equal(clk.Now().Truncate(time.Microsecond)) || s.Signer != signer.Address() {
			t.Fatalf("Seal: %+v", s)
		}
		if again, err := l.Seal(ctx); err != nil || again.Seq != 0 {
			t.Fatalf("Seal of a head that did not move: %+v, %v; want nothing sealed", again, err)
		}
		fill(t, l, 2)
		es = all(t, l)
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Seals != 1 || rep.LastSeal != s || rep.Unsealed != 2 {
			t.Fatalf("Report: %d seals, last %+v, %d unsealed; want 1, %+v, 2", rep.Seals, rep.LastSeal, rep.Unsealed, s)
		}
		var buf bytes.Buffer
		if err := l.Export(ctx, &buf, 0); err != nil {
			t.Fatal(err)
		}
		export := buf.Bytes()
		if off, err := VerifyJSONLWith(bytes.NewReader(export), VerifyOptions{Signer: signer.Address()}); err != nil || off != rep {
			t.Fatalf("VerifyJSONLWith: %+v, %v; want %+v", off, err, rep)
		}
		if _, err := VerifyJSONLWith(bytes.NewReader(export), VerifyOptions{Signer: testSigner(t, "22").Address()}); !isKind(err, KindSeal, 6) {
			t.Fatalf("VerifyJSONLWith another address: %v; want entry 6 %s", err, KindSeal)
		}

		rewriteFrom(t, db, es, 2)
		if _, err := l.Verify(ctx); !isKind(err, KindSeal, 6) {
			t.Fatalf("Verify of a chain rewritten from entry 2: %v; want entry 6 %s", err, KindSeal)
		}
		buf.Reset()
		if err := l.Export(ctx, &buf, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := VerifyJSONLWith(&buf, VerifyOptions{Signer: signer.Address()}); !isKind(err, KindSeal, 6) {
			t.Fatalf("VerifyJSONLWith of the rewritten chain: %v; want entry 6 %s", err, KindSeal)
		}
		// The node does not seal it either.
		if s, err := l.Seal(ctx); !isKind(err, KindSeal, 6) {
			t.Fatalf("Seal of the rewritten chain: %+v, %v; want entry 6 %s", s, err, KindSeal)
		}

		// Another node's log, sealed by its key.
		other := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Signer: testSigner(t, "22")})
		fill(t, other, 3)
		if _, err := other.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		if err := other.Export(ctx, &buf, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := VerifyJSONLWith(&buf, VerifyOptions{Signer: signer.Address()}); !isKind(err, KindSeal, 4) {
			t.Fatalf("another node's log against this node's address: %v; want entry 4 %s", err, KindSeal)
		}
	})
}

// The seals of a running log: entries deleted from the end with the seal
// that covered them, the head moved back and the chain rewritten after
// the seal before, verify (nothing there contradicts a seal: those
// entries are reported unsealed); the log that wrote the deleted seal
// refuses to seal the chain that replaced it.
func TestSealRefusesAChainWithoutItsLastSeal(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db := openDB(t, testdb.SQLite(t))
	l := openLog(t, db, Options{Now: clk.Now, Signer: testSigner(t, "11")})
	fill(t, l, 3)
	if _, err := l.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3)
	if _, err := l.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	es := all(t, l) // 1-3, seal 4, 5-7, seal 8
	execSQL(t, db, "DELETE FROM audit_log WHERE seq >= 8")
	rewriteFrom(t, db, es[:7], 5)
	setHead(t, db, "last_seq = 7")
	rep, err := l.Verify(ctx)
	if err != nil || rep.Seals != 1 || rep.LastSeal.Seq != 4 || rep.Unsealed != 3 {
		t.Fatalf("Verify: %+v, %v; want one seal (entry 4) and 3 entries unsealed", rep, err)
	}
	var ve *VerifyError
	if s, err := l.Seal(ctx); !errors.As(err, &ve) || ve.Kind != KindSeal || ve.Seq != 8 {
		t.Fatalf("Seal: %+v, %v; want entry 8 %s", s, err, KindSeal)
	}
}

// A log without a Signer cannot seal; its entries are all unsealed.
func TestSealNeedsASigner(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{})
	fill(t, l, 2)
	if _, err := l.Seal(ctx); !errors.Is(err, ErrNoSigner) {
		t.Fatalf("Seal without a Signer: %v; want ErrNoSigner", err)
	}
	if _, err := l.Append(ctx, Entry{Actor: "host", Step: StepSealed}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("Append of a seal: %v; want ErrInvalidEntry", err)
	}
	if rep, err := l.Verify(ctx); err != nil || rep.Seals != 0 || rep.Unsealed != 2 {
		t.Fatalf("Verify: %+v, %v; want 2 entries unsealed", rep, err)
	}
}

// isKind reports whether err is a *VerifyError of kind k at entry seq.
func isKind(err error, k Kind, seq int64) bool {
	var ve *VerifyError
	return errors.As(err, &ve) && ve.Kind == k && ve.Seq == seq
}

// A signed log prunes only entries a valid seal covers, and by the seal's
// signed time, not the entries' own: a chain rewritten with its entries
// backdated past the retention, its seals dropped, is not pruned (before,
// the node pruned it behind a checkpoint it signed); one whose seal it
// contradicts fails; and entries the node sealed are pruned once their
// seal is older than the retention.
func TestPruneOnlyWhatASealCovers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		db := openDB(t, dsn)
		opts := Options{Now: clk.Now, Retain: 30 * day, Signer: testSigner(t, "11")}
		l := openLog(t, db, opts)
		fill(t, l, 5)
		if _, err := l.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		fill(t, l, 2)
		es := all(t, l) // 1-5, seal 6, 7-8

		// Rewritten whole, dated 40 days back, the seal dropped, by
		// someone without the key while the node was stopped.
		back := func(e Entry) Entry { e.Time = e.Time.Add(-40 * day); return e }
		var forged []Entry
		for _, e := range es {
			if e.Step != StepSealed {
				forged = append(forged, back(e))
			}
		}
		execSQL(t, db, "DELETE FROM audit_log")
		prev := Genesis
		for i := range forged {
			e := &forged[i]
			e.Seq, e.Prev, e.Reason = int64(i+1), prev, "forged"
			e.Hash = Hash(*e)
			insertRow(t, db, *e)
			prev = e.Hash
		}
		setHead(t, db, "last_seq = 7, last_hash = '"+prev+"'")
		restarted := openLog(t, db, opts)
		if n, err := restarted.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("Prune of a backdated chain with no seal: %d, %v; want nothing pruned", n, err)
		}
		// Sealed now, by a node that cannot tell: its seal is today's.
		if _, err := restarted.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := restarted.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("Prune behind a seal of today: %d, %v; want nothing pruned", n, err)
		}

		// A chain rewritten under a seal old enough to prune behind: it
		// contradicts the seal, and nothing is pruned.
		clk2 := newClock()
		opts2 := opts
		opts2.Now = clk2.Now
		db2 := openDB(t, testdb.SQLite(t))
		l2 := openLog(t, db2, opts2)
		fill(t, l2, 5)
		if _, err := l2.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		fill(t, l2, 1)
		clk2.Advance(31 * day)
		rewriteFrom(t, db2, all(t, l2), 2)
		if n, err := openLog(t, db2, opts2).Prune(ctx); !isKind(err, KindSeal, 6) || n != 0 {
			t.Fatalf("Prune of a chain rewritten under its seal: %d, %v; want entry 6 %s", n, err, KindSeal)
		}

		// Honest entries, sealed: pruned once the seal is 30 days old, up
		// to it; the unsealed ones after it stay however old.
		db3 := openDB(t, testdb.SQLite(t))
		l3 := openLog(t, db3, opts)
		fill(t, l3, 4)
		if _, err := l3.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		fill(t, l3, 3)
		clk.Advance(30*day - time.Minute)
		if n, err := l3.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("Prune before the seal is 30 days old: %d, %v", n, err)
		}
		clk.Advance(2 * time.Minute)
		if n, err := l3.Prune(ctx); err != nil || n != 4 {
			t.Fatalf("Prune once the seal is 30 days old: %d, %v; want the 4 entries it seals", n, err)
		}
		rep, err := l3.Verify(ctx)
		if err != nil || rep.First != 5 || rep.Checkpoint.Seq != 4 {
			t.Fatalf("Verify after pruning: %+v, %v; want the chain from the seal (entry 5)", rep, err)
		}
	})
}
