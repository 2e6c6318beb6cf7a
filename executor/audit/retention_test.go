package audit

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

const day = 24 * time.Hour

// testSigner is the Signer of a fixed key, b repeated: one key per byte.
func testSigner(tb testing.TB, b string) Signer {
	tb.Helper()
	k, err := identity.FromHex(strings.Repeat(b, 32))
	if err != nil {
		tb.Fatal(err)
	}
	return IdentitySigner(k, identity.Mainnet)
}

// runDays runs the pruner of l (retention 30 days) for days days on clk:
// each day three entries are appended and sealed (as the node's hourly
// sealer does, when l has a Signer), the clock moves a day and the pruner
// ticks. It returns every entry appended.
func runDays(t *testing.T, l *Log, clk *clock, days int) []Entry {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	type round struct {
		n   int64
		err error
	}
	rounds := make(chan round)
	done := make(chan error, 1)
	go func() {
		done <- l.RunPruner(ctx, ticks, 0, func(n int64, err error) { rounds <- round{n, err} })
	}()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("RunPruner returned %v", err)
		}
	}()
	var all []Entry
	for d := range days {
		for i := range 3 {
			e, err := l.Append(ctx, sample(d*3+i))
			if err != nil {
				t.Fatalf("day %d: %v", d, err)
			}
			all = append(all, e)
		}
		if l.opts.Signer != nil {
			if _, err := l.Seal(ctx); err != nil {
				t.Fatalf("day %d: seal: %v", d, err)
			}
		}
		clk.Advance(day)
		ticks <- clk.Now()
		if r := <-rounds; r.err != nil {
			t.Fatalf("day %d: prune: %v", d, r.err)
		}
	}
	return all
}

// A node whose retention is 30 days runs 40 days, writing every day: the
// scheduled prune keeps the last 30 days, and the chain still verifies
// from a checkpoint the node's key signed, in the database and in an
// export.
func TestRetention40Days(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		start := clk.Now().Truncate(time.Microsecond) // entries are dated to the microsecond
		signer := testSigner(t, "11")
		l := openLog(t, openDB(t, dsn), Options{Now: clk.Now, Retain: 30 * day, Signer: signer})
		all := runDays(t, l, clk, 40)

		kept, err := l.Query(ctx, Filter{Limit: MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		days := map[int]int{}
		for _, e := range kept {
			if e.Step != StepPruned && e.Step != StepSealed {
				days[int(e.Time.Sub(start)/day)]++
			}
		}
		if len(days) != 30 {
			t.Errorf("entries of %d days kept, want 30: %v", len(days), days)
		}
		for d := 10; d < 40; d++ {
			if days[d] != 3 {
				t.Errorf("day %d: %d entries kept, want 3", d, days[d])
			}
		}
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatalf("Verify after 40 days: %v", err)
		}
		// The checkpoint is the last entry of day 9, signed by the node.
		if want := all[29]; rep.Checkpoint != (Anchor{want.Seq, want.Hash}) {
			t.Errorf("checkpoint %+v, want entry %d %s", rep.Checkpoint, want.Seq, want.Hash)
		}
		if rep.CheckpointSigner != signer.Address() {
			t.Errorf("checkpoint signer %q, want %q", rep.CheckpointSigner, signer.Address())
		}
		var buf bytes.Buffer
		if err := l.Export(ctx, &buf, 0); err != nil {
			t.Fatal(err)
		}
		if off, err := VerifyJSONL(&buf); err != nil || off != rep {
			t.Fatalf("VerifyJSONL: %+v, %v; want %+v", off, err, rep)
		}
	})
}

// After the 40 days, a checkpoint rewritten by someone who can write the
// database but has not the node's key fails, although every hash of the
// chain and the head record were recomputed to agree; and so do an edited
// entry and a pruned one put back.
func TestRetentionTampered(t *testing.T) {
	for _, c := range []struct {
		name string
		// tamper changes the log whose last pruning record is p.
		tamper func(t *testing.T, db *sqldb.DB, p Entry)
		kind   Kind
		// inExport: an export shows it too (a signature by another key
		// shows only against the node's address).
		inExport bool
	}{
		{"checkpoint moved over kept entries", func(t *testing.T, db *sqldb.DB, p Entry) {
			// Hide the oldest kept entries: the chain starts later, the
			// pruning record says so, and everything after it is rehashed.
			d := pruned(t, p)
			hide := d.FirstSeq + 2
			hidden := entryAt(t, db, hide)
			execSQL(t, db, "DELETE FROM audit_log WHERE seq <= "+itoa(hide))
			d.FirstSeq, d.FirstPrev, d.Removed = hide+1, hidden.Hash, d.Removed+3
			rewrite(t, db, p.Seq, d)
			setHead(t, db, "first_seq = "+itoa(hide+1)+", first_prev = '"+hidden.Hash+"'")
		}, KindCheckpoint, true},
		{"signature removed", func(t *testing.T, db *sqldb.DB, p Entry) {
			d := pruned(t, p)
			d.Signer, d.Sig = "", ""
			rewrite(t, db, p.Seq, d)
		}, KindCheckpoint, false},
		{"signed by another key", func(t *testing.T, db *sqldb.DB, p Entry) {
			d := pruned(t, p)
			if err := d.sign(testSigner(t, "22")); err != nil {
				t.Fatal(err)
			}
			rewrite(t, db, p.Seq, d)
		}, KindCheckpoint, false},
		{"signature of other fields", func(t *testing.T, db *sqldb.DB, p Entry) {
			d := pruned(t, p)
			d.Removed++
			rewrite(t, db, p.Seq, d)
		}, KindCheckpoint, true},
		{"kept entry edited", func(t *testing.T, db *sqldb.DB, p Entry) {
			execSQL(t, db, "UPDATE audit_log SET reason = 'nothing happened' WHERE seq = "+itoa(pruned(t, p).FirstSeq+1))
		}, KindEdited, true},
		{"pruned entry edited and put back", func(t *testing.T, db *sqldb.DB, p Entry) {
			e := sample(0)
			e.Seq, e.Time, e.Prev = pruned(t, p).FirstSeq-1, p.Time, Genesis
			e.Reason, e.Detail = "forged", nil
			e.Hash = Hash(e)
			insertRow(t, db, e)
		}, KindExtra, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			db := openDB(t, testdb.SQLite(t))
			l := openLog(t, db, Options{Now: clk.Now, Retain: 30 * day, Signer: testSigner(t, "11")})
			runDays(t, l, clk, 40)
			ps, err := l.Query(ctx, Filter{Limit: MaxQueryLimit})
			if err != nil {
				t.Fatal(err)
			}
			var last Entry
			for _, e := range ps {
				if e.Step == StepPruned {
					last = e
				}
			}
			if last.Seq == 0 {
				t.Fatal("no pruning record")
			}
			c.tamper(t, db, last)
			_, err = l.Verify(ctx)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Kind != c.kind {
				t.Fatalf("Verify: %v; want %s", err, c.kind)
			}
			var buf bytes.Buffer
			if err := l.Export(ctx, &buf, 0); err != nil {
				t.Fatal(err)
			}
			_, err = VerifyJSONL(&buf)
			if c.inExport && (!errors.As(err, &ve) || ve.Kind != c.kind) {
				t.Fatalf("VerifyJSONL: %v; want %s", err, c.kind)
			}
		})
	}
}

// A log that expects a signer refuses to seal over an unsigned or forged
// checkpoint, and prunes nothing unsealed: pruning never launders one.
func TestPruneRefusesUnsignedCheckpoint(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	db := openDB(t, testdb.SQLite(t))
	unsigned := openLog(t, db, Options{Now: clk.Now, Retain: day})
	fill(t, unsigned, 5)
	clk.Advance(2 * day)
	if _, err := unsigned.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, unsigned, 3)
	clk.Advance(2 * day)
	signed := openLog(t, db, Options{Now: clk.Now, Retain: day, Signer: testSigner(t, "11")})
	if s, err := signed.Seal(ctx); !isKind(err, KindCheckpoint, 6) {
		t.Fatalf("Seal over an unsigned checkpoint: %+v, %v", s, err)
	}
	if n, err := signed.Prune(ctx); n != 0 || err != nil {
		t.Fatalf("Prune over an unsigned checkpoint: removed %d, %v; want nothing", n, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// pruned decodes a pruning record's detail.
func pruned(t *testing.T, p Entry) prunedDetail {
	t.Helper()
	var d prunedDetail
	if err := jsonv2.Unmarshal(p.Detail, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// entryAt reads the entry seq straight from the table.
func entryAt(t *testing.T, db *sqldb.DB, seq int64) Entry {
	t.Helper()
	rows, err := db.R.QueryContext(context.Background(), db.Dialect.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq = ?"), seq)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no entry %d", seq)
	}
	e, err := scanEntry(rows)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// rewrite gives the pruning record seq the detail d and, as a forger who
// knows the format would, recomputes the hash of every entry from it to
// the end and the head record's last hash: only a signature can tell.
func rewrite(t *testing.T, db *sqldb.DB, seq int64, d prunedDetail) {
	t.Helper()
	ctx := context.Background()
	var last int64
	if err := db.R.QueryRowContext(ctx, "SELECT last_seq FROM audit_head WHERE id = 1").Scan(&last); err != nil {
		t.Fatal(err)
	}
	prev := entryAt(t, db, seq).Prev
	for s := seq; s <= last; s++ {
		e := entryAt(t, db, s)
		if s == seq {
			b, err := jsonv2.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			e.Detail = b
		}
		e.Prev = prev
		e.Hash = Hash(e)
		if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind("UPDATE audit_log SET detail = ?, prev = ?, hash = ? WHERE seq = ?"),
			string(e.Detail), e.Prev, e.Hash, s); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
	}
	setHead(t, db, "last_hash = '"+prev+"'")
}
