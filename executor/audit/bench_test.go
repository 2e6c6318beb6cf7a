package audit

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// benchDBs runs fn on SQLite (synchronous FULL, the default, and NORMAL)
// and PostgreSQL in one run, so that their figures compare:
//
//	SNAPNODE_TEST_POSTGRES=postgres://… go test -run '^$' -bench . -benchmem ./executor/audit
func benchDBs(b *testing.B, fn func(b *testing.B, db *sqldb.DB)) {
	open := func(b *testing.B, dsn string, o sqldb.Options) *sqldb.DB {
		db, err := sqldb.Open(context.Background(), dsn, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	b.Run("sqlite", func(b *testing.B) { fn(b, open(b, testdb.SQLite(b), sqldb.Options{})) })
	b.Run("sqlite-normal", func(b *testing.B) { fn(b, open(b, testdb.SQLite(b), sqldb.Options{Synchronous: "NORMAL"})) })
	b.Run("postgres", func(b *testing.B) { fn(b, open(b, testdb.Postgres(b), sqldb.Options{})) })
}

// plainTable creates audit_plain: audit_log's columns and indexes, for the
// baseline of a plain INSERT of the same row, without the chain.
func plainTable(b *testing.B, db *sqldb.DB) {
	seq := "bigint NOT NULL PRIMARY KEY"
	if db.Dialect == sqldb.SQLite {
		seq = "INTEGER PRIMARY KEY"
	}
	cols := []string{"seq " + seq, "ts bigint NOT NULL"}
	for _, c := range strings.Split(entryColumns, ", ")[2:] {
		cols = append(cols, c+" text NOT NULL")
	}
	for _, q := range []string{
		"CREATE TABLE audit_plain (" + strings.Join(cols, ", ") + ")",
		"CREATE INDEX audit_plain_task ON audit_plain (task, seq) WHERE task <> ''",
		"CREATE INDEX audit_plain_action ON audit_plain (action, seq) WHERE action <> ''",
	} {
		if _, err := db.W.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend appends one entry after another (the latency of one
// durable, chained append), beside a plain INSERT of the same row in its
// own transaction through the same sqldb.Write.
func BenchmarkAppend(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *sqldb.DB) {
		ctx := context.Background()
		l := openLog(b, db, Options{})
		plainTable(b, db)
		e := sample(3)
		var seq int64 // of audit_plain, across the runs of -count
		b.Run("chained", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("plain-insert", func(b *testing.B) {
			row, err := e.check(DefaultMaxDetail)
			if err != nil {
				b.Fatal(err)
			}
			row.Prev, row.Hash, row.Time = Genesis, Genesis, newClock().Now()
			q := db.Dialect.Rebind("INSERT INTO audit_plain (" + entryColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			b.ReportAllocs()
			for b.Loop() {
				seq++
				row.Seq = seq
				if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, q, insertArgs(row)...)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkAppendParallel appends from GOMAXPROCS×8 goroutines, as a busy
// node does: on SQLite concurrent appends share a commit; on PostgreSQL
// they queue on the head row.
func BenchmarkAppendParallel(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *sqldb.DB) {
		ctx := context.Background()
		l := openLog(b, db, Options{})
		plainTable(b, db)
		e := sample(3)
		var seq atomic.Int64 // of audit_plain, across the runs of -count
		b.Run("chained", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Append(ctx, e); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("plain-insert", func(b *testing.B) {
			row, err := e.check(DefaultMaxDetail)
			if err != nil {
				b.Fatal(err)
			}
			row.Prev, row.Hash, row.Time = Genesis, Genesis, newClock().Now()
			q := db.Dialect.Rebind("INSERT INTO audit_plain (" + entryColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				r := row
				for pb.Next() {
					r.Seq = seq.Add(1)
					if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, q, insertArgs(r)...)
						return err
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	})
}

// fillFast appends n entries in batches of 1,000.
func fillFast(b *testing.B, l *Log, n int) {
	b.Helper()
	batch := make([]Entry, 0, 1000)
	for i := range n {
		batch = append(batch, sample(i))
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := l.AppendBatch(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkVerify verifies a log of 100,000 entries, in the database and
// as an export; the metric entries/s is the walk's rate.
func BenchmarkVerify(b *testing.B) {
	const size = 100_000
	benchDBs(b, func(b *testing.B, db *sqldb.DB) {
		if strings.HasSuffix(b.Name(), "-normal") {
			b.Skip("same as sqlite")
		}
		ctx := context.Background()
		l := openLog(b, db, Options{})
		fillFast(b, l, size)
		b.Run("database", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rep, err := l.Verify(ctx)
				if err != nil || rep.Entries != size {
					b.Fatal(rep, err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
		var export bytes.Buffer
		if err := l.Export(ctx, &export, 0); err != nil {
			b.Fatal(err)
		}
		b.Run("export", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Export(ctx, io.Discard, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
		b.Run("jsonl", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(export.Len()))
			for b.Loop() {
				rep, err := VerifyJSONL(bytes.NewReader(export.Bytes()))
				if err != nil || rep.Entries != size {
					b.Fatal(rep, err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	})
}

// BenchmarkHash is the hash of one entry, the CPU part of an append.
func BenchmarkHash(b *testing.B) {
	e, _ := sample(3).check(DefaultMaxDetail)
	e.Prev = Genesis
	b.ReportAllocs()
	for b.Loop() {
		e.Hash = Hash(e)
	}
}
