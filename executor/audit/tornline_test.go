package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An export that ends inside a line (an export interrupted, a copy cut
// short) is told from one whose last lines were removed whole: the
// first is malformed at that line and says it was cut there, the second
// is truncated, the header saying where the chain ends. Before, a torn
// last line was reported only with the JSON decoder's words ("unexpected
// EOF within …").
func TestVerifyJSONLTornLastLine(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "export.golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(golden, []byte("\n"))
	lines = lines[:len(lines)-1]
	last := lines[len(lines)-1]
	torn := append(bytes.Join(lines[:len(lines)-1], nil), last[:len(last)/2]...)

	_, err = VerifyJSONL(bytes.NewReader(torn))
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Kind != KindMalformed || ve.Seq != 8 || ve.Line != 9 ||
		!strings.Contains(ve.Detail, "the export ends inside this line") {
		t.Fatalf("torn last line: %v; want entry 8 malformed at line 9, saying the export ends inside it", err)
	}

	_, err = VerifyJSONL(bytes.NewReader(bytes.Join(lines[:len(lines)-1], nil)))
	if !errors.As(err, &ve) || ve.Kind != KindTruncated || ve.Seq != 8 {
		t.Fatalf("last line removed: %v; want entry 8 truncated", err)
	}

	// Nor is one that is not JSON cut short.
	junk := append(bytes.Join(lines[:len(lines)-1], nil), []byte("garbage")...)
	_, err = VerifyJSONL(bytes.NewReader(junk))
	if !errors.As(err, &ve) || ve.Kind != KindMalformed || strings.Contains(ve.Detail, "ends inside") {
		t.Fatalf("junk without a newline: %v", err)
	}

	// A bad last line that is whole is not said to be cut.
	bad := append(bytes.Join(lines[:len(lines)-1], nil), []byte("{\"seq\":8}\n")...)
	_, err = VerifyJSONL(bytes.NewReader(bad))
	if !errors.As(err, &ve) || ve.Kind != KindMalformed || strings.Contains(ve.Detail, "ends inside") {
		t.Fatalf("a whole bad last line: %v", err)
	}
}
