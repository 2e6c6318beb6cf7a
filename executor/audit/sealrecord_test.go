package audit

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// The record of the last seal, kept outside the database: a chain cut
// after the seal before it and rewritten while the node is stopped, its
// last seal deleted, verifies on its own; a Log restarted with the record
// refuses to seal or prune it, CheckSealRecord names the record and the
// entry it expected, and VerifyWith given the record reports it as
// tampering. Before, the restarted Log sealed the rewritten chain.
func TestSealRecordCatchesChainRewrittenWhileStopped(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		record := filepath.Join(t.TempDir(), "audit-seal.json")
		db := openDB(t, dsn)
		opts := Options{Now: clk.Now, Retain: 30 * day, Signer: testSigner(t, "11"), SealRecord: record}
		l := openLog(t, db, opts)
		fill(t, l, 3)
		if _, err := l.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		fill(t, l, 3)
		clk.Advance(time.Hour)
		s, err := l.Seal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		es := all(t, l) // 1-3, seal 4, 5-7, seal 8
		rec, err := ReadSealRecord(record)
		if err != nil {
			t.Fatalf("ReadSealRecord after a seal: %v", err)
		}
		if rec.Seq != 8 || rec.Hash != es[7].Hash || !rec.Time.Equal(s.Time) || rec.Path != record {
			t.Fatalf("record %+v; want entry 8, hash %s, time %v", rec, es[7].Hash, s.Time)
		}
		if fi, err := os.Stat(record); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Fatalf("record file: %v, %v; want mode 0600", fi.Mode(), err)
		}
		_ = l.Close()

		// While the node is stopped: seal 8 deleted, entries 5-7 rewritten.
		execSQL(t, db, "DELETE FROM audit_log WHERE seq >= 8")
		rewriteFrom(t, db, es[:7], 5)
		setHead(t, db, "last_seq = 7")
		if rep, err := openLog(t, db, Options{Signer: opts.Signer}).Verify(ctx); err != nil || rep.LastSeal.Seq != 4 {
			t.Fatalf("Verify without the record: %+v, %v; want the chain verified to seal 4 (what the record is for)", rep, err)
		}

		restarted := openLog(t, db, opts)
		err = restarted.CheckSealRecord(ctx)
		if !isKind(err, KindRecord, 8) || !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), record) || !strings.Contains(err.Error(), es[7].Hash) {
			t.Fatalf("CheckSealRecord: %v; want entry 8 %s naming %s and hash %s", err, KindRecord, record, es[7].Hash)
		}
		if s, err := restarted.Seal(ctx); !isKind(err, KindRecord, 8) {
			t.Fatalf("Seal of the rewritten chain: %+v, %v; want entry 8 %s", s, err, KindRecord)
		}
		clk.Advance(31 * day)
		if n, err := restarted.Prune(ctx); !isKind(err, KindRecord, 8) || n != 0 {
			t.Fatalf("Prune of the rewritten chain: %d, %v; want nothing pruned, entry 8 %s", n, err, KindRecord)
		}
		if _, err := restarted.VerifyWith(ctx, VerifyOptions{SealRecord: &rec}); !isKind(err, KindRecord, 8) {
			t.Fatalf("VerifyWith the record: %v; want entry 8 %s", err, KindRecord)
		}
		if got, _ := ReadSealRecord(record); got != rec {
			t.Fatalf("record after the refusals: %+v; want it unchanged, %+v", got, rec)
		}

		// Entry 8 there, but another: the record is contradicted.
		x := es[7]
		x.Step, x.Detail, x.Decision, x.Prev = StepCompleted, nil, "done", all(t, restarted)[6].Hash
		x.Hash = Hash(x)
		insertRow(t, db, x)
		setHead(t, db, "last_seq = 8, last_hash = '"+x.Hash+"'")
		if err := restarted.CheckSealRecord(ctx); !isKind(err, KindRecord, 8) {
			t.Fatalf("CheckSealRecord of another entry 8: %v; want entry 8 %s", err, KindRecord)
		}
		if _, err := restarted.VerifyWith(ctx, VerifyOptions{SealRecord: &rec}); !isKind(err, KindRecord, 8) {
			t.Fatalf("VerifyWith the record, another entry 8: %v; want entry 8 %s", err, KindRecord)
		}
	})
}

// A record older than the chain is what a restore from a backup leaves,
// or a replica whose seals others followed: the chain holds its seal, and
// the Log seals, prunes and verifies; its next seal moves the record. A
// record whose seal another replica's pruning dropped behind a checkpoint
// the key signed is accepted too, and no record at all (a node before
// records, or one that never sealed) checks nothing.
func TestSealRecordOlderThanTheChain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		dir := t.TempDir()
		record := filepath.Join(dir, "audit-seal.json")
		db := openDB(t, dsn)
		opts := Options{Now: clk.Now, Retain: 30 * day, Signer: testSigner(t, "11"), SealRecord: record}
		l := openLog(t, db, opts)
		if err := l.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord without a record: %v", err)
		}
		if _, err := ReadSealRecord(record); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ReadSealRecord before any seal: %v; want fs.ErrNotExist", err)
		}
		fill(t, l, 3)
		if _, err := l.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(record) // seal 4, as a backup holds it
		if err != nil {
			t.Fatal(err)
		}
		// A replica without a record of its own seals on.
		replica := openLog(t, db, Options{Now: clk.Now, Retain: 30 * day, Signer: opts.Signer})
		fill(t, replica, 3)
		clk.Advance(time.Hour)
		if _, err := replica.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(record, old, 0o600); err != nil {
			t.Fatal(err)
		}
		restored := openLog(t, db, opts)
		if err := restored.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord of a record older than the chain: %v", err)
		}
		rec, err := ReadSealRecord(record)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := restored.VerifyWith(ctx, VerifyOptions{SealRecord: &rec}); err != nil || !rep.SealRecordChecked {
			t.Fatalf("VerifyWith an older record: %+v, %v; want it checked", rep, err)
		}
		fill(t, restored, 1)
		s, err := restored.Seal(ctx)
		if err != nil {
			t.Fatalf("Seal with an older record: %v", err)
		}
		if rec, err := ReadSealRecord(record); err != nil || rec.Seq != s.Seq {
			t.Fatalf("record after the seal: %+v, %v; want entry %d", rec, err, s.Seq)
		}

		// The replica's pruning drops seal 4 behind its signed checkpoint.
		if err := os.WriteFile(record, old, 0o600); err != nil {
			t.Fatal(err)
		}
		clk.Advance(31 * day)
		fill(t, replica, 1)
		if _, err := replica.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := replica.Prune(ctx); err != nil || n == 0 {
			t.Fatalf("Prune: %d, %v", n, err)
		}
		if err := restored.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord of a record pruned past: %v", err)
		}
		if rep, err := restored.VerifyWith(ctx, VerifyOptions{SealRecord: &rec}); err != nil || rep.SealRecordChecked {
			t.Fatalf("VerifyWith a record pruned past: %+v, %v; want it verified, not checked", rep, err)
		}
		if _, err := restored.Prune(ctx); err != nil {
			t.Fatalf("Prune with a record pruned past: %v", err)
		}
	})
}

// A record that is not one (edited by hand, or half a file) stops the
// Log as a contradicted one does: it cannot say which seal to expect.
func TestSealRecordUnreadable(t *testing.T) {
	ctx := context.Background()
	record := filepath.Join(t.TempDir(), "audit-seal.json")
	if err := os.WriteFile(record, []byte(`{"seq": 4, "hash": "xyz"`), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Signer: testSigner(t, "11"), SealRecord: record})
	fill(t, l, 2)
	if err := l.CheckSealRecord(ctx); !errors.Is(err, ErrSealRecord) || !strings.Contains(err.Error(), record) {
		t.Fatalf("CheckSealRecord of a broken record: %v; want ErrSealRecord naming %s", err, record)
	}
	if _, err := l.Seal(ctx); !errors.Is(err, ErrSealRecord) {
		t.Fatalf("Seal with a broken record: %v; want ErrSealRecord", err)
	}
}

// A record's temporary file a crash left beside it is removed by the next
// write.
func TestSealRecordFileHygiene(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit-seal.json")
	left := filepath.Join(dir, ".audit-seal.json.123456.tmp")
	if err := os.WriteFile(left, []byte(`{"seq":1`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := SealRecord{Seq: 3, Hash: strings.Repeat("ab", 32), Time: time.Unix(1e9, 0).UTC()}
	if err := WriteSealRecord(path, r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary file a crash left is still there: %v", err)
	}
	if got, err := ReadSealRecord(path); err != nil || got.Seq != 3 || got.Hash != r.Hash {
		t.Errorf("ReadSealRecord = %+v, %v", got, err)
	}
}

// A node whose key changed (a new key file, the old data kept): the
// record's seal is in the chain, its signature holds, by the old key.
// CheckSealRecord says so, naming both addresses, as ErrOtherKey, not as
// a chain that lacks the recorded seal (KindRecord: before, it was one,
// and the node's refusal told the operator to move the record aside, as
// after a restore); Verify reports the chain's seals as the old key's
// (ErrOtherKey, the signer and the key wanted named in the error), and
// SealStatusOf shows that seal, not valid. A seal naming the old key that
// the old key did not sign is no such thing: a forgery, KindSeal alone.
func TestSealRecordOfAnotherKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		record := filepath.Join(t.TempDir(), "audit-seal.json")
		db := openDB(t, dsn)
		old, now := testSigner(t, "11"), testSigner(t, "22")
		opts := Options{Now: clk.Now, Retain: 30 * day, Signer: old, SealRecord: record}
		l := openLog(t, db, opts)
		fill(t, l, 3)
		s, err := l.Seal(ctx) // 4
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 2) // 5, 6
		_ = l.Close()

		opts.Signer = now
		renewed := openLog(t, db, opts)
		err = renewed.CheckSealRecord(ctx)
		if !errors.Is(err, ErrOtherKey) || isKind(err, KindRecord, 4) || !strings.Contains(err.Error(), old.Address()) || !strings.Contains(err.Error(), now.Address()) || !strings.Contains(err.Error(), record) {
			t.Fatalf("CheckSealRecord under another key: %v; want ErrOtherKey naming %s, %s and %s, not %s", err, old.Address(), now.Address(), record, KindRecord)
		}
		rep, err := renewed.Verify(ctx)
		var ve *VerifyError
		if !errors.As(err, &ve) || !errors.Is(err, ErrOtherKey) || !errors.Is(err, ErrTampered) || ve.Seq != 4 || ve.Kind != KindSeal || ve.Signer != old.Address() || ve.Want != now.Address() {
			t.Fatalf("Verify under another key: %v; want entry 4 %s, ErrOtherKey, signed by %s, want %s", err, KindSeal, old.Address(), now.Address())
		}
		st := SealStatusOf(rep, err)
		if st.Last.Seq != 4 || !st.Last.Time.Equal(s.Time) || st.Last.Signer != old.Address() || st.Valid || !st.OtherKey || st.Unsealed != 2 || st.Problem == "" {
			t.Fatalf("SealStatusOf: %+v; want the seal at 4 by %s, not valid (another key), 2 entries after it", st, old.Address())
		}
		if rep, err := renewed.VerifyWith(ctx, VerifyOptions{Signer: old.Address()}); err != nil || rep.LastSeal.Seq != 4 {
			t.Fatalf("Verify against the old key: %+v, %v; want it intact", rep, err)
		}

		// A seal that names the old key, signed by a third.
		es := all(t, renewed)
		forged := es[3]
		var d sealDetail
		if err := jsonv2.Unmarshal(forged.Detail, &d); err != nil {
			t.Fatal(err)
		}
		sig, err := testSigner(t, "33").Sign(SealDigest(d.Signer, d.Seq, d.Hash, forged.Time))
		if err != nil {
			t.Fatal(err)
		}
		d.Sig = hex.EncodeToString(sig[:])
		if es[3].Detail, err = jsonv2.Marshal(d); err != nil {
			t.Fatal(err)
		}
		rewriteFrom(t, db, es, 4)
		_, err = renewed.Verify(ctx)
		if !isKind(err, KindSeal, 4) || errors.Is(err, ErrOtherKey) {
			t.Fatalf("Verify of a forged seal naming the old key: %v; want entry 4 %s, not ErrOtherKey", err, KindSeal)
		}
		if err := renewed.CheckSealRecord(ctx); errors.Is(err, ErrOtherKey) || !errors.Is(err, ErrTampered) {
			t.Fatalf("CheckSealRecord of a forged seal: %v; want ErrTampered, not ErrOtherKey", err)
		}
	})
}

// Without a record of the last seal (a data folder from before it, or the
// record deleted), CheckSealRecord looks at the chain's last seal alone:
// signed, its signature holding, by another key than the log's, it is
// ErrOtherKey naming both addresses and the record's file, as with the
// record; under the log's own key, without a Signer, or with no seal, it
// checks nothing. Before, a Log without a record checked nothing, and a
// node whose key changed started on a log it could neither seal nor
// prune.
func TestCheckSealRecordWithoutRecordOtherKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		record := filepath.Join(t.TempDir(), "audit-seal.json")
		db := openDB(t, dsn)
		old, now := testSigner(t, "11"), testSigner(t, "22")
		opts := Options{Now: clk.Now, Signer: old, SealRecord: record}
		l := openLog(t, db, opts)
		fill(t, l, 3)
		if err := openLog(t, db, Options{Signer: now, SealRecord: record}).CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord of a log never sealed: %v", err)
		}
		if _, err := l.Seal(ctx); err != nil { // 4
			t.Fatal(err)
		}
		fill(t, l, 2)
		if _, err := l.Seal(ctx); err != nil { // 7
			t.Fatal(err)
		}
		fill(t, l, 1)
		if err := os.Remove(record); err != nil {
			t.Fatal(err)
		}
		if err := l.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord without a record, the same key: %v", err)
		}
		if err := openLog(t, db, Options{SealRecord: record}).CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord without a record or a Signer: %v", err)
		}

		opts.Signer = now
		err := openLog(t, db, opts).CheckSealRecord(ctx)
		var ve *VerifyError
		if !errors.As(err, &ve) || !errors.Is(err, ErrOtherKey) || ve.Kind != KindSeal || ve.Seq != 7 || ve.Signer != old.Address() || ve.Want != now.Address() || !strings.Contains(err.Error(), record) {
			t.Fatalf("CheckSealRecord without a record, another key: %v; want entry 7 %s, ErrOtherKey, signed by %s, want %s, naming %s", err, KindSeal, old.Address(), now.Address(), record)
		}
		if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("CheckSealRecord wrote a record: %v", err)
		}
	})
}

// Entries after the last seal deleted while the node is stopped, the head
// record left as it was: the chain now ends before its head says it does.
// CheckSealRecord (the node's check at start) reports it, as Verify does,
// so that the node does not append after a gap it could never close: its
// next entry would chain to the head's hash across the missing ones. The
// head's last entry edited (its hash no longer the head's) is reported
// too. Before, CheckSealRecord looked at the record's seal and the last
// seal only, and passed both.
func TestCheckSealRecordTailCut(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		for _, c := range []struct {
			name string
			sql  string
			kind Kind
			seq  int64
		}{
			{"tail cut", "DELETE FROM audit_log WHERE seq >= 6", KindTruncated, 6},
			{"last entry replaced", "UPDATE audit_log SET hash = '" + strings.Repeat("ab", 32) + "' WHERE seq = 7", KindEdited, 7},
		} {
			t.Run(c.name, func(t *testing.T) {
				record := filepath.Join(t.TempDir(), "audit-seal.json")
				var db *sqldb.DB // a fresh database per case
				if strings.HasPrefix(dsn, "sqlite:") {
					db = openDB(t, testdb.SQLite(t))
				} else {
					db = openDB(t, testdb.Postgres(t))
				}
				opts := Options{Signer: testSigner(t, "11"), SealRecord: record}
				l := openLog(t, db, opts)
				fill(t, l, 3)
				if _, err := l.Seal(ctx); err != nil {
					t.Fatal(err)
				}
				fill(t, l, 3) // 1-3, seal 4, 5-7
				_ = l.Close()
				if _, err := openLog(t, db, opts).Verify(ctx); err != nil {
					t.Fatalf("before: %v", err)
				}
				execSQL(t, db, c.sql)
				if _, err := openLog(t, db, opts).Verify(ctx); !isKind(err, c.kind, c.seq) {
					t.Fatalf("Verify: %v", err)
				}
				if err := openLog(t, db, opts).CheckSealRecord(ctx); !isKind(err, c.kind, c.seq) || !errors.Is(err, ErrTampered) {
					t.Fatalf("CheckSealRecord: %v; want entry %d %s, as Verify", err, c.seq, c.kind)
				}
			})
		}
	})
}
