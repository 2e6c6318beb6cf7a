package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// tamperCase is a change made to a 10-entry log behind its back, and the
// verdict Verify must give.
type tamperCase struct {
	Name string `json:"name"`
	// SQL (with ? placeholders for nothing) or, for cases built in Go, do.
	SQL  []string `json:"sql"`
	do   func(t *testing.T, db *sqldb.DB, es []Entry)
	Kind Kind  `json:"kind"`
	Seq  int64 `json:"seq"`
	// anchors are given to Verify.
	anchors func(es []Entry) []Anchor
}

// forgedCases need the entries' hashes: a forger who knows the format.
func forgedCases() []tamperCase {
	rehash := func(e Entry) Entry { e.Hash = Hash(e); return e }
	return []tamperCase{
		{Name: "forged entry after the end", Kind: KindExtra, Seq: 11, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			insertRow(t, db, rehash(Entry{Seq: 11, Time: es[9].Time, Actor: "host", Step: StepPromoted, Prev: es[9].Hash}))
		}},
		{Name: "forged entry before the start", Kind: KindExtra, Seq: 0, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			insertRow(t, db, rehash(Entry{Seq: 0, Time: es[0].Time, Actor: "host", Step: StepPromoted, Prev: Genesis}))
		}},
		{Name: "entry replaced, its hash recomputed", Kind: KindUnlinked, Seq: 6, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			e := es[4]
			e.Decision = "block"
			replaceRow(t, db, rehash(e))
		}},
		{Name: "last entry replaced, its hash recomputed", Kind: KindHead, Seq: 10, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			e := es[9]
			e.Actor = "operator:bc1pmallory"
			replaceRow(t, db, rehash(e))
		}},
		{Name: "start moved by hand", Kind: KindHead, Seq: 3, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			execSQL(t, db, "DELETE FROM audit_log WHERE seq < 3")
			setHead(t, db, "first_seq = 3, first_prev = '"+es[1].Hash+"'")
		}},
		{Name: "tail cut and the head moved back, with an anchor", Kind: KindTruncated, Seq: 8, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			execSQL(t, db, "DELETE FROM audit_log WHERE seq >= 8")
			setHead(t, db, fmt.Sprintf("last_seq = 7, last_hash = '%s'", es[6].Hash))
		}, anchors: func(es []Entry) []Anchor { return []Anchor{{0, Genesis}, {3, es[2].Hash}, {10, es[9].Hash}} }},
		{Name: "chain rewritten from entry 5, with an anchor", Kind: KindAnchor, Seq: 7, do: func(t *testing.T, db *sqldb.DB, es []Entry) {
			prev := es[3].Hash
			for _, e := range es[4:] {
				e.Reason = "rewritten"
				e.Prev = prev
				e = rehash(e)
				replaceRow(t, db, e)
				prev = e.Hash
			}
			setHead(t, db, "last_hash = '"+prev+"'")
		}, anchors: func(es []Entry) []Anchor { return []Anchor{{10, es[9].Hash}, {7, es[6].Hash}, {2, es[1].Hash}} }},
	}
}

func replaceRow(t *testing.T, db *sqldb.DB, e Entry) {
	t.Helper()
	execSQL(t, db, fmt.Sprintf("DELETE FROM audit_log WHERE seq = %d", e.Seq))
	insertRow(t, db, e)
}

func setHead(t *testing.T, db *sqldb.DB, set string) {
	t.Helper()
	execSQL(t, db, "UPDATE audit_head SET "+set+" WHERE id = 1")
}

func loadTamperCases(t *testing.T) []tamperCase {
	b, err := os.ReadFile(filepath.Join("testdata", "tamper.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []tamperCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return append(cases, forgedCases()...)
}

// Every change of testdata/tamper.json and forgedCases is found and the
// entry named, by Verify and by VerifyJSONL of an export.
func TestTamper(t *testing.T) {
	cases := loadTamperCases(t)
	testdb.Each(t, func(t *testing.T, dsn string) {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) {
				ctx := context.Background()
				// A fresh database per case.
				var db *sqldb.DB
				if strings.HasPrefix(dsn, "sqlite:") {
					db = openDB(t, testdb.SQLite(t))
				} else {
					db = openDB(t, testdb.Postgres(t))
				}
				l := openLog(t, db, Options{})
				es := fill(t, l, 10)
				var anchors []Anchor
				if c.anchors != nil {
					anchors = c.anchors(es)
				}
				if _, err := l.Verify(ctx, anchors...); err != nil {
					t.Fatalf("before: %v", err)
				}
				execSQL(t, db, c.SQL...)
				if c.do != nil {
					c.do(t, db, es)
				}
				_, err := l.Verify(ctx, anchors...)
				checkVerdict(t, "Verify", err, c.Kind, c.Seq)

				var buf bytes.Buffer
				if err := l.Export(ctx, &buf, 0); err != nil {
					if c.Kind == KindHead && c.Seq == 0 || strings.HasSuffix(c.Name, "detail") {
						checkVerdict(t, "Export", err, c.Kind, c.Seq)
						return
					}
					t.Fatalf("Export: %v", err)
				}
				_, err = VerifyJSONL(&buf, anchors...)
				checkVerdict(t, "VerifyJSONL", err, c.Kind, c.Seq)
			})
		}
	})
}

func checkVerdict(t *testing.T, what string, err error, kind Kind, seq int64) {
	t.Helper()
	var ve *VerifyError
	if !errors.As(err, &ve) || !errors.Is(err, ErrTampered) {
		t.Fatalf("%s: %v, want a VerifyError", what, err)
	}
	if ve.Kind != kind || ve.Seq != seq {
		t.Fatalf("%s: %v; want %s at entry %d", what, err, kind, seq)
	}
}
