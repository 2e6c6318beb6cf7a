package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// exportFormat names the export format in its header line.
const exportFormat = "snapnode-audit-v1"

// timeLayout is the time of an exported entry: UTC, to the microsecond.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// MaxLine bounds a line of an export, in bytes: an entry at the field
// limits, escaped, is well within it.
const MaxLine = 1 << 20

// header is the first line of an export: the head record when the export
// was taken, and the first seq exported.
type header struct {
	Format    string `json:"format"`
	FirstSeq  int64  `json:"first_seq"`
	FirstPrev string `json:"first_prev"`
	LastSeq   int64  `json:"last_seq"`
	LastHash  string `json:"last_hash"`
	From      int64  `json:"from"`
}

// line is an exported entry.
type line struct {
	Seq           int64          `json:"seq"`
	Time          string         `json:"time"`
	Actor         string         `json:"actor"`
	Task          string         `json:"task"`
	Action        string         `json:"action"`
	Step          string         `json:"step"`
	Decision      string         `json:"decision"`
	Reason        string         `json:"reason"`
	PolicyVersion string         `json:"policy_version"`
	PreHash       string         `json:"pre_hash"`
	PostHash      string         `json:"post_hash"`
	Detail        jsontext.Value `json:"detail,omitzero"`
	Prev          string         `json:"prev"`
	Hash          string         `json:"hash"`
}

// Export writes the log as JSON Lines, from one snapshot, streaming: a
// header line
//
//	{"format":"snapnode-audit-v1","first_seq":1,"first_prev":"00…","last_seq":9,"last_hash":"…","from":1}
//
// (the head record, and the first seq exported), then one line per entry
// with seq ≥ from, in seq order, with every field:
//
//	{"seq":1,"time":"2026-05-01T12:00:00.000000Z","actor":"host","task":"…","action":"…","step":"received",
//	 "decision":"","reason":"","policy_version":"","pre_hash":"","post_hash":"","detail":{…},"prev":"00…","hash":"…"}
//
// detail is left out when there is none; time is UTC with six digits of
// fraction. Every row is written as the database holds it, tampered ones
// too, so that VerifyJSONL of the export finds what Verify finds — but for
// a row whose detail is not the minimal JSON Append stores, which cannot
// be written faithfully on one line: Export stops there with a
// *VerifyError (KindEdited) naming it. A from at or before the start of
// the chain exports it whole.
func (l *Log) Export(ctx context.Context, w io.Writer, from int64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	tx, err := l.readTx(ctx)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	h, err := readHead(ctx, tx)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	hdr := header{Format: exportFormat, FirstSeq: h.first, FirstPrev: h.firstPrev, LastSeq: h.last, LastHash: h.lastHash,
		From: min(max(from, h.first), h.last+1)}
	bw := bufio.NewWriterSize(w, 64<<10)
	b, err := jsonv2.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	if _, err := bw.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	q, args := "SELECT "+entryColumns+" FROM audit_log ORDER BY seq", []any(nil)
	if from > h.first {
		q, args = "SELECT "+entryColumns+" FROM audit_log WHERE seq >= ? ORDER BY seq", []any{from}
	}
	rows, err := tx.QueryContext(ctx, l.d.Rebind(q), args...)
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	defer rows.Close()
	var buf []byte
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if buf, err = appendLine(buf[:0], e); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	return nil
}

// appendLine appends e's export line, newline included.
func appendLine(dst []byte, e Entry) ([]byte, error) {
	ln := line{
		Seq: e.Seq, Time: e.Time.UTC().Format(timeLayout), Actor: e.Actor, Task: e.Task, Action: e.Action,
		Step: string(e.Step), Decision: e.Decision, Reason: e.Reason, PolicyVersion: e.PolicyVersion,
		PreHash: e.PreHash, PostHash: e.PostHash, Detail: jsontext.Value(e.Detail), Prev: e.Prev, Hash: e.Hash,
	}
	if len(ln.Detail) > 0 && !isMinimal(ln.Detail) {
		// Append stores only minimal JSON: the row was changed, and
		// writing it reformatted would not be faithful.
		return dst, &VerifyError{Seq: e.Seq, Kind: KindEdited, Detail: "its detail is not the minimal JSON Append stores"}
	}
	// Invalid UTF-8 (which Append refuses, so only a changed row has it)
	// is written as U+FFFD: the line then fails VerifyJSONL, as the row
	// fails Verify.
	b, err := jsonv2.Marshal(ln, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return dst, fmt.Errorf("entry %d: %w", e.Seq, err)
	}
	return append(append(dst, b...), '\n'), nil
}

// decodeLine reads an export line strictly: no unknown or duplicate
// members, UTF-8 only, the time in timeLayout.
func decodeLine(b []byte) (Entry, error) {
	var ln line
	if err := jsonv2.Unmarshal(b, &ln, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Entry{}, err
	}
	t, err := time.Parse(timeLayout, ln.Time)
	if err != nil {
		return Entry{}, fmt.Errorf("time: %w", err)
	}
	e := Entry{
		Seq: ln.Seq, Time: t, Actor: ln.Actor, Task: ln.Task, Action: ln.Action, Step: Step(ln.Step),
		Decision: ln.Decision, Reason: ln.Reason, PolicyVersion: ln.PolicyVersion,
		PreHash: ln.PreHash, PostHash: ln.PostHash, Prev: ln.Prev, Hash: ln.Hash,
	}
	if len(ln.Detail) > 0 {
		if !isMinimal(ln.Detail) {
			return Entry{}, errors.New("detail: not in the minimal form Export writes")
		}
		e.Detail = []byte(ln.Detail.Clone())
	}
	return e, nil
}

// isMinimal reports whether v is valid JSON (RFC 7493) in the form
// jsontext.Value.Format gives: no whitespace, shortest escapes.
func isMinimal(v jsontext.Value) bool {
	f := v.Clone()
	return f.Format() == nil && bytes.Equal(f, v)
}

// lineReader reads the lines of an export, at most MaxLine bytes each,
// through a small buffer.
type lineReader struct {
	r    *bufio.Reader
	long []byte // a line longer than the buffer
	n    int64  // lines read
	// unterminated: the line read last ended the input without a
	// newline.
	unterminated bool
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReaderSize(r, 64<<10)} }

var errLongLine = fmt.Errorf("line longer than %d bytes", MaxLine)

// next returns the next line without its newline (valid until the next
// call), io.EOF at the end, or errLongLine (the line skipped).
func (lr *lineReader) next() ([]byte, error) {
	b, err := lr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		lr.long = append(lr.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = lr.r.ReadSlice('\n')
			if len(lr.long) <= MaxLine {
				lr.long = append(lr.long, b...)
			}
		}
		b = lr.long
	}
	if err == io.EOF {
		if len(b) == 0 {
			return nil, io.EOF
		}
		err = nil // a last line without its newline
		lr.unterminated = true
	}
	if err != nil {
		return nil, err
	}
	lr.n++
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if len(b) > MaxLine {
		return nil, errLongLine
	}
	return b, nil
}

// VerifyJSONL verifies an export (see Log.Export) offline, by the rules of
// Log.Verify, reading r once in constant memory. The header line stands
// for the head record; an export taken from a later seq (from after the
// chain's start) is verified from its first entry, taken as given
// (Report.Partial), unless an anchor names the entry just before it (the
// head of the export before, for exports taken in pieces): the first
// entry must then chain to that anchor's hash (else KindAnchor). Anchors
// further back are not in the export and cannot be checked
// (Report.AnchorsPruned). A line that is not an entry is KindMalformed; lines in
// the wrong order are KindReordered, the entry named being the one out of
// place. Errors reading r are returned as they are.
func VerifyJSONL(r io.Reader, anchors ...Anchor) (Report, error) {
	return VerifyJSONLWith(r, VerifyOptions{Anchors: anchors})
}

// VerifyJSONLWith is VerifyJSONL with o's anchors and, when o.Signer is
// set, that address as the only signer of seals and checkpoints: the
// node's, so that another node's export, or one sealed with another key,
// fails (KindSeal, KindCheckpoint).
func VerifyJSONLWith(r io.Reader, o VerifyOptions) (Report, error) {
	lr := newLineReader(r)
	b, err := lr.next()
	switch {
	case err == io.EOF:
		return Report{}, &VerifyError{Kind: KindMalformed, Line: 1, Detail: "empty export: no header"}
	case errors.Is(err, errLongLine):
		return Report{}, &VerifyError{Kind: KindMalformed, Line: 1, Detail: "header: " + err.Error()}
	case err != nil:
		return Report{}, fmt.Errorf("audit: verify export: %w", err)
	}
	var hdr header
	if err := jsonv2.Unmarshal(b, &hdr, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Report{}, &VerifyError{Kind: KindMalformed, Line: 1, Detail: "header: " + err.Error()}
	}
	if hdr.Format != exportFormat {
		return Report{}, &VerifyError{Kind: KindMalformed, Line: 1, Detail: fmt.Sprintf("header: format %q, want %q", hdr.Format, exportFormat)}
	}
	v, verr := newVerifier(head{first: hdr.FirstSeq, firstPrev: hdr.FirstPrev, last: hdr.LastSeq, lastHash: hdr.LastHash}, hdr.From, o.Anchors)
	if verr != nil {
		verr.Line = 1
		return Report{}, verr
	}
	v.signer = o.Signer
	v.expectRecord(o.SealRecord)
	v.rep.Partial = v.partial
	for {
		b, err := lr.next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, errLongLine) {
			return v.report(), &VerifyError{Seq: v.next, Kind: KindMalformed, Line: lr.n, Detail: err.Error()}
		}
		if err != nil {
			return v.report(), fmt.Errorf("audit: verify export: %w", err)
		}
		x, err := decodeLine(b)
		if err != nil {
			detail := err.Error()
			if lr.unterminated && errors.Is(err, io.ErrUnexpectedEOF) {
				// Export writes whole lines: this one was cut.
				detail = "the export ends inside this line (cut short: an export interrupted, or a copy cut): " + detail
			}
			return v.report(), &VerifyError{Seq: v.next, Kind: KindMalformed, Line: lr.n, Detail: detail}
		}
		if verr := v.observe(x); verr != nil {
			verr.Line = lr.n
			if verr.Kind == KindMissing {
				if at, ok := lr.find(verr.Seq); ok {
					return v.report(), &VerifyError{Seq: verr.Seq, Kind: KindReordered, Line: at,
						Detail: fmt.Sprintf("the entry comes at line %d, after entry %d", at, x.Seq)}
				}
			}
			return v.report(), verr
		}
	}
	if verr := v.finish(); verr != nil {
		return v.report(), verr
	}
	return v.report(), nil
}

// find reads the rest of the export for the entry seq and returns its
// line. Unreadable lines are passed over.
func (lr *lineReader) find(seq int64) (int64, bool) {
	for {
		b, err := lr.next()
		if errors.Is(err, errLongLine) {
			continue
		}
		if err != nil {
			return 0, false
		}
		var x struct {
			Seq int64 `json:"seq"`
		}
		if jsonv2.Unmarshal(b, &x) == nil && x.Seq == seq {
			return lr.n, true
		}
	}
}
