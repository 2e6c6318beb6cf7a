package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// The seed corpus of the fuzz targets is in testdata/fuzz; -update
// rewrites it from the golden export and some damaged copies.
func TestFuzzCorpus(t *testing.T) {
	if !*update {
		for _, target := range []string{"FuzzVerifyJSONL", "FuzzDecodeLine"} {
			files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
			if err != nil || len(files) < 5 {
				t.Errorf("%s: %d seed files, %v", target, len(files), err)
			}
		}
		return
	}
	_, _, export := goldenLog(t, testdb.SQLite(t))
	lines := bytes.SplitAfter(export, []byte("\n"))
	seeds := map[string][]byte{
		"export":       export,
		"header-only":  lines[0],
		"no-header":    bytes.Join(lines[1:], nil),
		"swapped":      bytes.Join([][]byte{lines[0], lines[2], lines[1]}, nil),
		"cut":          export[:len(export)/2],
		"crlf":         bytes.ReplaceAll(export, []byte("\n"), []byte("\r\n")),
		"edited":       bytes.Replace(export, []byte("bc1pproposer1"), []byte("bc1pproposer9"), 1),
		"empty":        nil,
		"not-json":     []byte("{\n}\n[]\n"),
		"partial-from": bytes.Replace(export, []byte(`"from":1}`), []byte(`"from":3}`), 1),
	}
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range seeds {
		write("FuzzVerifyJSONL", name, b)
	}
	for i, l := range lines {
		write("FuzzDecodeLine", fmt.Sprintf("line-%d", i), bytes.TrimSuffix(l, []byte("\n")))
	}
}

// VerifyJSONL never panics; on a reader that cannot fail, every error is a
// *VerifyError; a stream it accepts has one verified entry per line after
// the header, and writing those entries again gives a stream it accepts
// with the same report.
func FuzzVerifyJSONL(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyJSONL(bytes.NewReader(data))
		if err != nil {
			var ve *VerifyError
			if !errors.As(err, &ve) || !errors.Is(err, ErrTampered) {
				t.Fatalf("error %v (%T) is not a VerifyError", err, err)
			}
			return
		}
		lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
		if int64(len(lines)-1) != rep.Entries {
			t.Fatalf("%d entry lines, report says %d entries", len(lines)-1, rep.Entries)
		}
		again := append(bytes.TrimSuffix(lines[0], []byte("\r")), '\n')
		for _, b := range lines[1:] {
			e, err := decodeLine(b)
			if err != nil {
				t.Fatalf("accepted line does not decode: %v", err)
			}
			if again, err = appendLine(again, e); err != nil {
				t.Fatal(err)
			}
		}
		rep2, err := VerifyJSONL(bytes.NewReader(again))
		if err != nil || rep2 != rep {
			t.Fatalf("rewritten stream: %+v, %v; want %+v", rep2, err, rep)
		}
	})
}

// A line that decodes encodes to a line that decodes to the same entry,
// with the same hash, and encodes to the same bytes.
func FuzzDecodeLine(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeLine(b)
		if err != nil {
			return
		}
		out, err := appendLine(nil, e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		e2, err := decodeLine(bytes.TrimSuffix(out, []byte("\n")))
		if err != nil {
			t.Fatalf("encoded line %s does not decode: %v", out, err)
		}
		if !equalEntries([]Entry{e}, []Entry{e2}) || Hash(e) != Hash(e2) {
			t.Fatalf("round trip changed the entry:\n%+v\n%+v", e, e2)
		}
		out2, _ := appendLine(nil, e2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding not stable:\n%s\n%s", out, out2)
		}
	})
}
