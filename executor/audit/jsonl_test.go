package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/internal/testdb"
)

// goldenLog is a log of 8 entries made with a fixed clock, and its export.
func goldenLog(t *testing.T, dsn string) (*Log, []Entry, []byte) {
	t.Helper()
	clk := newClock()
	l := openLog(t, openDB(t, dsn), Options{Now: clk.Now})
	var es []Entry
	for i := range 8 {
		e, err := l.Append(context.Background(), sample(i))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		clk.Advance(1500 * time.Millisecond)
	}
	var buf bytes.Buffer
	if err := l.Export(context.Background(), &buf, 0); err != nil {
		t.Fatal(err)
	}
	return l, es, buf.Bytes()
}

// The export of a fixed log is testdata/export.golden.jsonl, byte for byte,
// in both dialects; it verifies offline with the report Verify gives.
func TestExportGolden(t *testing.T) {
	path := filepath.Join("testdata", "export.golden.jsonl")
	testdb.Each(t, func(t *testing.T, dsn string) {
		l, es, got := goldenLog(t, dsn)
		if *update && strings.HasPrefix(dsn, "sqlite:") {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("export differs from %s:\n%s", path, got)
		}
		online, err := l.Verify(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		offline, err := VerifyJSONL(bytes.NewReader(got), Anchor{5, es[4].Hash})
		if err != nil {
			t.Fatal(err)
		}
		online.AnchorsChecked = 1
		if offline != online {
			t.Fatalf("VerifyJSONL report %+v, Verify's %+v", offline, online)
		}
		// Every line decodes to the entry stored.
		lines := bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n"))
		if len(lines) != 1+len(es) {
			t.Fatalf("%d lines", len(lines))
		}
		for i, b := range lines[1:] {
			e, err := decodeLine(b)
			if err != nil || !equalEntries([]Entry{e}, es[i:i+1]) {
				t.Fatalf("line %d decodes to %+v, %v; want %+v", i+2, e, err, es[i])
			}
		}
	})
}

// An export of the tail verifies from its first entry, and the link of
// that entry is the only thing taken on trust.
func TestExportPartial(t *testing.T) {
	l, es, _ := goldenLog(t, testdb.SQLite(t))
	ctx := context.Background()
	for _, from := range []int64{-3, 0, 1, 4, 8, 9, 100} {
		var buf bytes.Buffer
		if err := l.Export(ctx, &buf, from); err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyJSONL(bytes.NewReader(buf.Bytes()), Anchor{2, es[1].Hash}, Anchor{6, es[5].Hash})
		if err != nil {
			t.Fatalf("from %d: %v", from, err)
		}
		start := max(from, 1)
		want := Report{Entries: max(0, 8-start+1), Checkpoint: Anchor{0, Genesis}, Head: Anchor{8, es[7].Hash}, Partial: start > 1, Unsealed: max(0, 8-start+1)}
		if want.Entries > 0 {
			want.First, want.Last = start, 8
		}
		for _, a := range []int64{2, 6} {
			if a >= start {
				want.AnchorsChecked++
			} else {
				want.AnchorsPruned++
			}
		}
		if rep != want {
			t.Errorf("from %d: %+v, want %+v", from, rep, want)
		}
	}
	// A changed entry in a partial export is found.
	var buf bytes.Buffer
	if err := l.Export(ctx, &buf, 4); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(buf.Bytes(), []byte(`"reason":"step 5\nof`), []byte(`"reason":"step 5\nOF`), 1)
	_, err := VerifyJSONL(bytes.NewReader(bad))
	checkVerdict(t, "partial export", err, KindEdited, 6)
}

// editLine changes member name of line i (from 0, the header) of export.
func editLine(t *testing.T, export []byte, i int, name string, change func(jsontext.Value) jsontext.Value) []byte {
	t.Helper()
	lines := bytes.SplitAfter(export, []byte("\n"))
	var m map[string]jsontext.Value
	if err := jsonv2.Unmarshal(lines[i], &m); err != nil {
		t.Fatal(err)
	}
	v, ok := m[name]
	if !ok && name != "detail" {
		t.Fatalf("line %d has no %s", i, name)
	}
	m[name] = change(v)
	b, err := jsonv2.Marshal(m, jsonv2.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	lines[i] = append(b, '\n')
	return bytes.Join(lines, nil)
}

func mustJSON(v any) jsontext.Value {
	b, err := jsonv2.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Each member of an exported entry, changed, makes that entry fail, named
// by seq and line.
func TestVerifyJSONLEditedMember(t *testing.T) {
	_, _, export := goldenLog(t, testdb.SQLite(t))
	for _, name := range []string{"seq", "time", "actor", "task", "action", "step", "decision", "reason", "policy_version",
		"pre_hash", "post_hash", "detail", "prev", "hash"} {
		for _, i := range []int{1, 4, 8} { // first, middle (entry 4 has file hashes, 4 = sample(3) a detail) and last entries
			bad := editLine(t, export, i, name, func(v jsontext.Value) jsontext.Value {
				var s string
				switch name {
				case "seq":
					return mustJSON(1000 + i)
				case "detail":
					return jsontext.Value(`{"path":"/etc/passwd"}`)
				case "time":
					return mustJSON(fmt.Sprintf("2026-05-01T12:00:%02d.123457Z", i))
				}
				_ = jsonv2.Unmarshal(v, &s)
				switch {
				case isHexHash(s):
					s = s[:63] + map[bool]string{true: "0", false: "1"}[s[63] != '0']
				case name == "step":
					s = "denied"
				default:
					s += "x"
				}
				return mustJSON(s)
			})
			_, err := VerifyJSONL(bytes.NewReader(bad))
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Kind != KindEdited || ve.Seq != int64(i) || ve.Line != int64(i+1) {
				t.Errorf("%s of entry %d changed: %v; want entry %d edited, line %d", name, i, err, i, i+1)
			}
		}
	}
}

// Line-level changes: deleted, moved, repeated, cut off or unreadable
// lines, and a changed header.
func TestVerifyJSONLLines(t *testing.T) {
	_, es, export := goldenLog(t, testdb.SQLite(t))
	lines := bytes.SplitAfter(export, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last newline
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	without := func(i ...int) []byte {
		var out [][]byte
		for k, l := range lines {
			if !slices.Contains(i, k) {
				out = append(out, l)
			}
		}
		return join(out...)
	}
	swapped := func(a, b int) []byte {
		ls := slices.Clone(lines)
		ls[a], ls[b] = ls[b], ls[a]
		return join(ls...)
	}
	with := func(at int, extra []byte) []byte {
		ls := slices.Insert(slices.Clone(lines), at, extra)
		return join(ls...)
	}
	for _, c := range []struct {
		name      string
		export    []byte
		kind      Kind
		seq, line int64
	}{
		{"middle line deleted", without(4), KindMissing, 4, 5},
		{"first entry deleted", without(1), KindMissing, 1, 1 + 1},
		{"last entry deleted", without(8), KindTruncated, 8, 0},
		{"last three deleted", without(6, 7, 8), KindTruncated, 6, 0},
		{"neighbours swapped", swapped(3, 4), KindReordered, 3, 5},
		{"distant lines swapped", swapped(2, 7), KindReordered, 2, 8},
		{"line repeated", with(5, lines[4]), KindReordered, 4, 6},
		{"old line repeated at the end", join(export, lines[2]), KindReordered, 2, 10},
		{"cut in the last line", export[:len(export)-30], KindMalformed, 8, 9},
		{"garbage line", with(3, []byte("hello\n")), KindMalformed, 3, 4},
		{"blank line", with(3, []byte("\n")), KindMalformed, 3, 4},
		{"unknown member", with(3, bytes.Replace(lines[3], []byte(`"seq":3,`), []byte(`"seq":3,"approved":true,`), 1)), KindMalformed, 3, 4},
		{"duplicate member", with(3, bytes.Replace(lines[3], []byte(`"seq":3,`), []byte(`"seq":3,"actor":"host",`), 1)), KindMalformed, 3, 4},
		{"time without microseconds", with(3, bytes.Replace(lines[3], []byte(`.123456Z`), []byte(`Z`), 1)), KindMalformed, 3, 4},
		{"time with an offset", with(3, bytes.Replace(lines[3], []byte(`Z"`), []byte(`+00:00"`), 1)), KindMalformed, 3, 4},
		{"invalid UTF-8", with(3, bytes.Replace(lines[3], []byte(`"task":"task-0"`), []byte("\"task\":\"task-\xff\""), 1)), KindMalformed, 3, 4},
		{"long line", with(3, append(bytes.Repeat([]byte(" "), MaxLine+1), '\n')), KindMalformed, 3, 4},
		{"long line ends the export", append(slices.Clone(export), bytes.Repeat([]byte("x"), 3*MaxLine)...), KindMalformed, 9, 10},
		{"no header", without(0), KindMalformed, 0, 1},
		{"empty", nil, KindMalformed, 0, 1},
		{"header of another format", editLine(t, export, 0, "format", func(jsontext.Value) jsontext.Value { return mustJSON("other") }), KindMalformed, 0, 1},
		{"header ends earlier", editLine(t, export, 0, "last_seq", func(jsontext.Value) jsontext.Value { return mustJSON(6) }), KindExtra, 7, 8},
		{"header ends later", editLine(t, export, 0, "last_seq", func(jsontext.Value) jsontext.Value { return mustJSON(9) }), KindTruncated, 9, 0},
		{"header's last hash", editLine(t, export, 0, "last_hash", func(jsontext.Value) jsontext.Value { return mustJSON(es[6].Hash) }), KindHead, 8, 0},
		{"header's start moved", editLine(t, export, 0, "first_seq", func(jsontext.Value) jsontext.Value { return mustJSON(2) }), KindExtra, 1, 2},
	} {
		_, err := VerifyJSONL(bytes.NewReader(c.export))
		var ve *VerifyError
		if !errors.As(err, &ve) || !errors.Is(err, ErrTampered) || ve.Kind != c.kind || ve.Seq != c.seq || ve.Line != c.line {
			t.Errorf("%s: %v; want %s at entry %d, line %d", c.name, err, c.kind, c.seq, c.line)
		}
	}
	// CRLF line ends and a missing final newline change nothing.
	for name, ex := range map[string][]byte{
		"CRLF":            bytes.ReplaceAll(export, []byte("\n"), []byte("\r\n")),
		"no last newline": bytes.TrimSuffix(export, []byte("\n")),
	} {
		if _, err := VerifyJSONL(bytes.NewReader(ex)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A reader's own error is not tampering.
	broken := io.MultiReader(bytes.NewReader(export[:200]), iotestErrReader{})
	if _, err := VerifyJSONL(broken); err == nil || errors.Is(err, ErrTampered) {
		t.Errorf("read error: %v", err)
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// An export taken from a later seq starts with an entry whose link to the
// one before it is taken as given; an anchor at that entry before (the head
// of the export before, kept off the machine) is what the link must meet.
// A chain rewritten below the export's start, exported from there, fails
// on it; before, the anchor was counted as not checkable and the export
// verified.
func TestVerifyJSONLPartialAnchorAtStart(t *testing.T) {
	ctx := context.Background()
	l, es, _ := goldenLog(t, testdb.SQLite(t))
	var genuine bytes.Buffer
	if err := l.Export(ctx, &genuine, 5); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyJSONL(bytes.NewReader(genuine.Bytes()), Anchor{4, es[3].Hash})
	if err != nil || rep.AnchorsChecked != 1 || rep.AnchorsPruned != 0 || !rep.Partial {
		t.Fatalf("genuine export from 5 with the anchor of entry 4: %+v, %v; want it checked", rep, err)
	}

	// The same log with entry 2 changed and every hash after it
	// recomputed, exported from 5.
	clk := newClock()
	forged := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now})
	for i := range 8 {
		e := sample(i)
		if i == 1 {
			e.Reason = "nothing happened"
		}
		if _, err := forged.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		clk.Advance(1500 * time.Millisecond)
	}
	var rewritten bytes.Buffer
	if err := forged.Export(ctx, &rewritten, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyJSONL(bytes.NewReader(rewritten.Bytes())); err != nil {
		t.Fatalf("the rewritten export alone: %v; want it to verify (no anchor)", err)
	}
	_, err = VerifyJSONL(bytes.NewReader(rewritten.Bytes()), Anchor{4, es[3].Hash})
	checkVerdict(t, "rewritten export from 5 with the anchor of entry 4", err, KindAnchor, 4)
	// An anchor further back is still out of the export's reach.
	rep, err = VerifyJSONL(bytes.NewReader(rewritten.Bytes()), Anchor{2, es[1].Hash})
	if err != nil || rep.AnchorsPruned != 1 {
		t.Fatalf("rewritten export from 5 with the anchor of entry 2: %+v, %v; want it not checkable", rep, err)
	}
}
