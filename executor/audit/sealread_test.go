package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// A record of the last seal that cannot be read — no permission, a
// directory in its place, a file over the bound, or one that is not a
// record (garbled, truncated, empty, a record of no seal) — is
// ErrSealRecord and not ErrTampered: the node wrote it atomically, so a
// file it cannot read says the file is damaged or out of reach, not that
// the log changed (whoever could change the file could as well delete
// it). CheckSealRecord still refuses (the start fails closed), and
// VerifyWithRecord verifies the chain without the record, so that a
// chain that holds is reported so and one that does not as ErrTampered
// as well. A well-formed record the chain does not hold is tampering
// (KindRecord), not a read failure. Before, VerifyWithRecord returned at
// the record, the chain not verified.
func TestSealRecordUnreadableIsNotTampering(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	record := filepath.Join(dir, "audit-seal.json")
	db := openDB(t, testdb.SQLite(t))
	opts := Options{Signer: testSigner(t, "11"), SealRecord: record}
	l := openLog(t, db, opts)
	fill(t, l, 3)
	if _, err := l.Seal(ctx); err != nil { // 4, recorded
		t.Fatal(err)
	}
	fill(t, l, 2)
	es := all(t, l)
	good, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		t.Helper()
		_ = os.RemoveAll(record)
		if err := os.WriteFile(record, good, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T)
	}{
		{"garbled", func(t *testing.T) { writeRecordFile(t, record, "not a record\n") }},
		{"truncated", func(t *testing.T) { writeRecordFile(t, record, string(good[:len(good)/2])) }},
		{"empty", func(t *testing.T) { writeRecordFile(t, record, "") }},
		{"no seal named", func(t *testing.T) { writeRecordFile(t, record, `{"seq":0,"hash":"xyz"}`) }},
		{"too large", func(t *testing.T) { writeRecordFile(t, record, strings.Repeat(" ", maxSealRecord)+string(good)) }},
		{"directory", func(t *testing.T) {
			if err := os.Remove(record); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(record, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"permission denied", func(t *testing.T) {
			if os.Geteuid() == 0 {
				t.Skip("root reads a file of mode 0000")
			}
			if err := os.Chmod(record, 0); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer restore()
			c.setup(t)
			if _, err := ReadSealRecord(record); !errors.Is(err, ErrSealRecord) || errors.Is(err, ErrTampered) {
				t.Errorf("ReadSealRecord: %v; want ErrSealRecord, not ErrTampered", err)
			}
			err := l.CheckSealRecord(ctx)
			if !errors.Is(err, ErrSealRecord) || errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), record) {
				t.Errorf("CheckSealRecord: %v; want ErrSealRecord naming %s, not ErrTampered", err, record)
			}
			rep, err := l.VerifyWithRecord(ctx, VerifyOptions{}, record)
			if !errors.Is(err, ErrSealRecord) || errors.Is(err, ErrTampered) {
				t.Errorf("VerifyWithRecord: %v; want ErrSealRecord, not ErrTampered", err)
			}
			if rep.Entries != 6 || rep.Seals != 1 || rep.SealRecord.Path != record || rep.SealRecordChecked {
				t.Errorf("VerifyWithRecord's report: %+v; want the 6 entries and the seal verified without the record at %s", rep, record)
			}
			if st := SealStatusOf(rep, err); !st.Valid || st.Stopped || st.Last.Seq != 4 || st.Unsealed != 2 {
				t.Errorf("SealStatusOf: %+v; want seal 4 valid, 2 unsealed, the walk not stopped", st)
			}
		})
	}

	// Unreadable, and the chain edited: both are said.
	writeRecordFile(t, record, "not a record\n")
	execSQL(t, db, "UPDATE audit_log SET reason = 'edited' WHERE seq = 2")
	rep, err := l.VerifyWithRecord(ctx, VerifyOptions{}, record)
	if !errors.Is(err, ErrSealRecord) || !isKind(err, KindEdited, 2) || rep.Entries != 1 {
		t.Errorf("VerifyWithRecord of an edited chain with an unreadable record: %+v, %v; want ErrSealRecord and entry 2 %s", rep, err, KindEdited)
	}
	if st := SealStatusOf(rep, err); !st.Stopped {
		t.Errorf("SealStatusOf: %+v; want the walk stopped", st)
	}
	replaceRow(t, db, es[1])

	// A record that reads, naming a seal the chain does not hold:
	// tampering, not a read failure.
	writeRecordFile(t, record, `{"seq":4,"hash":"`+strings.Repeat("ab", 32)+`","time":"2026-05-01T12:00:00Z"}`)
	for name, err := range map[string]error{"CheckSealRecord": l.CheckSealRecord(ctx), "VerifyWithRecord": func() error {
		_, err := l.VerifyWithRecord(ctx, VerifyOptions{}, record)
		return err
	}()} {
		if !isKind(err, KindRecord, 4) || errors.Is(err, ErrSealRecord) {
			t.Errorf("%s with a record contradicted by the chain: %v; want entry 4 %s, not ErrSealRecord", name, err, KindRecord)
		}
	}
}

// writeRecordFile writes s at path, 0600.
func writeRecordFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Without a record, the chain's last seal must hold, as the recorded
// seal must with one: a seal over a chain rewritten below it, a seal
// whose signature no longer verifies, or a seal entry edited, is
// tampering (KindSeal, or KindEdited), found by CheckSealRecord — the
// node's start — not only by a later Seal, which could never seal that
// log again. So is a last seal after the one a record names. An empty
// log, a log never sealed and one whose last seal holds pass. Before,
// CheckSealRecord looked at the last seal's signer alone and passed them.
func TestCheckSealRecordLastSealMustHold(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		record := filepath.Join(t.TempDir(), "audit-seal.json")
		db := openDB(t, dsn)
		opts := Options{Signer: testSigner(t, "11"), SealRecord: record}
		l := openLog(t, db, opts)
		if err := l.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord of an empty log: %v", err)
		}
		fill(t, l, 3)
		if err := l.CheckSealRecord(ctx); err != nil {
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
		es := all(t, l)
		if err := os.Remove(record); err != nil {
			t.Fatal(err)
		}
		if err := l.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord without a record, the last seal holding: %v", err)
		}
		reset := func() {
			t.Helper()
			for _, e := range es {
				replaceRow(t, db, e)
			}
			setHead(t, db, "last_hash = '"+es[7].Hash+"'")
			if _, err := l.Verify(ctx); err != nil {
				t.Fatalf("the chain put back: %v", err)
			}
		}
		check := func(what string, k Kind) {
			t.Helper()
			err := openLog(t, db, opts).CheckSealRecord(ctx)
			if !isKind(err, k, 7) || !errors.Is(err, ErrTampered) || errors.Is(err, ErrOtherKey) || errors.Is(err, ErrSealRecord) {
				t.Errorf("CheckSealRecord, %s: %v; want entry 7 %s, ErrTampered", what, err, k)
			}
		}

		// Entries 5 and 6 rewritten below seal 7, every hash after
		// recomputed, the head too.
		rewriteFrom(t, db, es, 5)
		check("the chain rewritten below the last seal", KindSeal)
		reset()

		// The seal's signature altered, its hash recomputed.
		x := es[6]
		d := []byte(string(x.Detail))
		i := strings.Index(string(d), `"sig":"`) + len(`"sig":"`)
		d[i] = "10"[min(1, int(d[i]-'0'))] // another hex digit
		x.Detail = d
		rewriteFrom(t, db, append(es[:6:6], x, es[7]), 7)
		check("the last seal's signature altered", KindSeal)
		reset()

		// The seal entry edited, its hash left.
		execSQL(t, db, "UPDATE audit_log SET decision = 'edited' WHERE seq = 7")
		check("the last seal edited", KindEdited)
		reset()

		// With a record of seal 4, older than the chain's last seal:
		// that one must hold too.
		if err := WriteSealRecord(record, SealRecord{Seq: 4, Hash: es[3].Hash, Time: es[3].Time}); err != nil {
			t.Fatal(err)
		}
		if err := l.CheckSealRecord(ctx); err != nil {
			t.Fatalf("CheckSealRecord with a record older than the chain: %v", err)
		}
		rewriteFrom(t, db, es, 5)
		check("a record of seal 4, the chain rewritten below seal 7", KindSeal)
		reset()
	})
}
