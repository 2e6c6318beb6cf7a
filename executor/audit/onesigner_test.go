package audit

import (
	"bytes"
	"context"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/testdb"
)

// Verified without a signer given (an export checked without --address,
// a log opened without the node's key), a log whose seals one key signed
// takes its checkpoints from that key only, as the node's own Verify
// does: the start of the chain cannot be moved, to hide the entries
// before, by a pruning record appended after the last seal, unsigned or
// signed by a key of the forger's. Before, both verified, the report
// naming a checkpoint "unsigned" (or another signer) beside the seals of
// the node's key.
func TestVerifyOneSignerForSealsAndCheckpoints(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	node := testSigner(t, "11")
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Signer: node})
	es := fill(t, l, 5)
	if _, err := l.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 2)
	var export bytes.Buffer
	if err := l.Export(ctx, &export, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyJSONL(bytes.NewReader(export.Bytes())); err != nil {
		t.Fatalf("the export as written: %v", err)
	}
	lines := bytes.SplitAfter(export.Bytes(), []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last newline
	var last Entry
	if last, _ = decodeLine(bytes.TrimSuffix(lines[len(lines)-1], []byte("\n"))); last.Seq != 8 {
		t.Fatalf("last entry %+v", last)
	}

	for _, tc := range []struct {
		name   string
		signer Signer // nil: unsigned
	}{
		{"unsigned checkpoint", nil},
		{"checkpoint signed by another key", testSigner(t, "22")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Entries 1…3 cut, and a pruning record after the last entry
			// that says the chain starts at 4.
			d := prunedDetail{FirstSeq: 4, FirstPrev: es[2].Hash, Removed: 3}
			if tc.signer != nil {
				if err := d.sign(tc.signer); err != nil {
					t.Fatal(err)
				}
			}
			detail, err := jsonv2.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			p := Entry{Seq: 9, Time: last.Time, Actor: "host", Step: StepPruned, Decision: "retain", Reason: "retain 720h0m0s",
				Detail: detail, Prev: last.Hash}
			p.Hash = Hash(p)
			hdr, err := jsonv2.Marshal(header{Format: exportFormat, FirstSeq: 4, FirstPrev: es[2].Hash, LastSeq: 9, LastHash: p.Hash, From: 4})
			if err != nil {
				t.Fatal(err)
			}
			forged := append(hdr, '\n')
			for _, ln := range lines[4:] {
				forged = append(forged, ln...)
			}
			if forged, err = appendLine(forged, p); err != nil {
				t.Fatal(err)
			}
			rep, err := VerifyJSONL(bytes.NewReader(forged))
			if !isKind(err, KindCheckpoint, 9) {
				t.Fatalf("VerifyJSONL of the forged export = %v (report %+v); want entry 9 checkpoint", err, rep)
			}
			// Given the node's address, it fails as it did.
			if _, err := VerifyJSONLWith(bytes.NewReader(forged), VerifyOptions{Signer: node.Address()}); !isKind(err, KindCheckpoint, 9) {
				t.Fatalf("with the node's address: %v; want entry 9 checkpoint", err)
			}
		})
	}
}
