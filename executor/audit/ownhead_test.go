package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// The entries after the last seal, cut (or rewritten) with the head record
// moved back while the node runs, leave a chain that verifies; the Log
// that appended them knows better and does not seal over it: Seal names
// the last entry it appended, and the chain's end (KindTruncated) or the
// entry the chain has there instead (KindAnchor). Entries appended in a
// caller's transaction (AppendTx) count once Committed says so.
func TestSealRefusesOwnEntriesCut(t *testing.T) {
	cases := []struct {
		name     string
		appendTx bool
		tamper   func(t *testing.T, db *sqldb.DB, es []Entry)
		kind     Kind
		seq      int64
	}{
		{"tail cut, head moved back", false, func(t *testing.T, db *sqldb.DB, es []Entry) {
			execSQL(t, db, "DELETE FROM audit_log WHERE seq > 8")
			setHead(t, db, fmt.Sprintf("last_seq = 8, last_hash = '%s'", es[7].Hash))
		}, KindTruncated, 9},
		{"tail rewritten, head moved", false, func(t *testing.T, db *sqldb.DB, es []Entry) {
			rewriteFrom(t, db, es, 9)
		}, KindAnchor, 11},
		{"tail appended in the caller's transaction cut", true, func(t *testing.T, db *sqldb.DB, es []Entry) {
			execSQL(t, db, "DELETE FROM audit_log WHERE seq > 7")
			setHead(t, db, fmt.Sprintf("last_seq = 7, last_hash = '%s'", es[6].Hash))
		}, KindTruncated, 8},
	}
	testdb.Each(t, func(t *testing.T, dsn string) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				db := openDB(t, freshDSN(t, dsn))
				record := filepath.Join(t.TempDir(), "audit-seal.json")
				l := openLog(t, db, Options{Signer: testSigner(t, "11"), SealRecord: record, MaxEntries: 3})
				fill(t, l, 5)
				if _, err := l.Seal(ctx); err != nil {
					t.Fatal(err)
				}
				if c.appendTx {
					var out []Entry
					err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
						var err error
						out, err = l.AppendTx(ctx, tx, []Entry{sample(5), sample(6), sample(7), sample(8), sample(9)})
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					l.Committed(out)
				} else {
					fill(t, l, 5)
				}
				es := all(t, l)
				c.tamper(t, db, es)
				if _, err := l.Verify(ctx); err != nil {
					t.Fatalf("Verify: %v; the rewrite should verify", err)
				}
				s, err := l.Seal(ctx)
				var ve *VerifyError
				if !errors.As(err, &ve) || !errors.Is(err, ErrTampered) || ve.Kind != c.kind || ve.Seq != c.seq {
					t.Fatalf("Seal: %+v, %v; want %s at entry %d", s, err, c.kind, c.seq)
				}
				if n, err := l.Prune(ctx); n != 0 || !errors.Is(err, ErrTampered) {
					t.Fatalf("Prune: %d removed, %v; want it refused", n, err)
				}
			})
		}
	})
}

// freshDSN is a new database of dsn's kind.
func freshDSN(t *testing.T, dsn string) string {
	if len(dsn) > 7 && dsn[:7] == "sqlite:" {
		return testdb.SQLite(t)
	}
	return testdb.Postgres(t)
}
