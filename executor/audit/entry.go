package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/internal/lowerhex"
)

// Genesis is the Prev of the first entry of a log: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// hashDomain starts every hashed encoding, so that an entry's hash is never
// the hash of something else snapnode signs or hashes.
const hashDomain = "snapnode-audit-v1"

// Limits of an entry's fields, in bytes.
const (
	MaxIDLength       = 256      // Actor, Task, Action, PolicyVersion
	MaxDecisionLength = 64       // Decision
	MaxReasonLength   = 4096     // Reason
	DefaultMaxDetail  = 16 << 10 // Detail (compact JSON), unless Options.MaxDetail says otherwise
	MaxDetailLimit    = 256 << 10
)

// Step is what happened to an action; each entry records one.
type Step string

// The steps of an action's life, and the log's own.
const (
	StepReceived   Step = "received"    // a proposal or descriptor arrived
	StepValidated  Step = "validated"   // it passed the schemas and the rules beyond them
	StepRejected   Step = "rejected"    // it failed them (Reason says why)
	StepJudged     Step = "judged"      // the policy decided (Decision: promote, confirm, block)
	StepSandboxed  Step = "sandboxed"   // its effects were staged and diffed
	StepHeld       Step = "held"        // it waits for an operator's confirmation
	StepConfirmed  Step = "confirmed"   // an operator approved it
	StepDenied     Step = "denied"      // an operator denied it
	StepPromoted   Step = "promoted"    // its effects reached the workspace
	StepCompleted  Step = "completed"   // it ended without effects (THINK, FINISH)
	StepRolledBack Step = "rolled_back" // its effects were undone
	StepFailed     Step = "failed"      // it failed after validation
	// StepPruned is written by the log when it drops old entries (Prune);
	// Append refuses it.
	StepPruned Step = "pruned"
	// StepSealed is written by the log when it seals its head (Seal);
	// Append refuses it.
	StepSealed Step = "sealed"
)

var steps = map[Step]bool{
	StepReceived: true, StepValidated: true, StepRejected: true, StepJudged: true, StepSandboxed: true,
	StepHeld: true, StepConfirmed: true, StepDenied: true, StepPromoted: true, StepCompleted: true,
	StepRolledBack: true, StepFailed: true, StepPruned: true, StepSealed: true,
}

// Valid reports whether s is one of the steps above.
func (s Step) Valid() bool { return steps[s] }

// Entry is one record of the log. Append assigns Seq, Time, Prev and Hash;
// the caller fills in the rest.
type Entry struct {
	// Seq numbers the entries from 1, without gaps.
	Seq int64 `json:"seq"`
	// Time is when the entry was appended (the log's clock), to the
	// microsecond, in UTC. Seq, not Time, is the order: the clocks of two
	// nodes sharing a database differ, and a clock may be set back.
	Time time.Time `json:"time"`
	// Actor is who caused the step: the proposer's P2TR address,
	// "host", or "operator:<address>".
	Actor string `json:"actor"`
	// Task and Action are the task id and the action id (the proposal's
	// id); either may be empty for entries of the host.
	Task   string `json:"task"`
	Action string `json:"action"`
	Step   Step   `json:"step"`
	// Decision is the outcome of the step (e.g. promote, confirm, block,
	// allow, deny), Reason why; PolicyVersion names the policy that
	// judged.
	Decision      string `json:"decision"`
	Reason        string `json:"reason"`
	PolicyVersion string `json:"policy_version"`
	// PreHash and PostHash are the lowercase hex SHA-256 of a file's
	// content before and after the step, "" when there is none.
	PreHash  string `json:"pre_hash"`
	PostHash string `json:"post_hash"`
	// Detail is optional JSON (at most Options.MaxDetail bytes once
	// compacted); Append stores it in its minimal form (no whitespace,
	// shortest string escapes).
	Detail json.RawMessage `json:"detail,omitempty"`
	// Prev is the Hash of the entry before (Genesis for the first); Hash
	// is the entry's own (see Hash).
	Prev string `json:"prev"`
	Hash string `json:"hash"`
}

// ErrInvalidEntry: an entry given to Append breaks a rule of its fields;
// the error is an *EntryError.
var ErrInvalidEntry = errors.New("invalid audit entry")

// EntryError names the field of an entry that breaks a rule.
type EntryError struct {
	Field string // the JSON name: "actor", "step", "detail"…
	Rule  string
}

func (e *EntryError) Error() string { return "audit: entry field " + e.Field + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalidEntry) hold.
func (e *EntryError) Unwrap() error { return ErrInvalidEntry }

// check validates the caller's fields of e and returns e with Detail in
// its minimal form.
func (e Entry) check(maxDetail int) (Entry, error) {
	for _, f := range []struct {
		name, v   string
		max       int
		multiline bool
		required  bool
	}{
		{"actor", e.Actor, MaxIDLength, false, true},
		{"task", e.Task, MaxIDLength, false, false},
		{"action", e.Action, MaxIDLength, false, false},
		{"decision", e.Decision, MaxDecisionLength, false, false},
		{"reason", e.Reason, MaxReasonLength, true, false},
		{"policy_version", e.PolicyVersion, MaxIDLength, false, false},
	} {
		if err := checkText(f.name, f.v, f.max, f.multiline, f.required); err != nil {
			return e, err
		}
	}
	if !e.Step.Valid() {
		return e, &EntryError{"step", fmt.Sprintf("%q is not a step", e.Step)}
	}
	if err := checkFileHash("pre_hash", e.PreHash); err != nil {
		return e, err
	}
	if err := checkFileHash("post_hash", e.PostHash); err != nil {
		return e, err
	}
	d, err := normalDetail(e.Detail, maxDetail)
	if err != nil {
		return e, err
	}
	e.Detail = d
	return e, nil
}

// checkText: valid UTF-8, within max bytes, no NUL (PostgreSQL text cannot
// hold it) and, unless multiline, no control characters at all.
func checkText(field, v string, max int, multiline, required bool) error {
	switch {
	case v == "" && required:
		return &EntryError{field, "required"}
	case len(v) > max:
		return &EntryError{field, fmt.Sprintf("%d bytes, at most %d", len(v), max)}
	case !utf8.ValidString(v):
		return &EntryError{field, "not UTF-8"}
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			if multiline && (r == '\n' || r == '\t' || r == '\r') {
				continue
			}
			return &EntryError{field, fmt.Sprintf("control character %U", r)}
		}
	}
	return nil
}

func checkFileHash(field, v string) error {
	if v == "" {
		return nil
	}
	if !isHexHash(v) {
		return &EntryError{field, "want 64 lowercase hex digits (SHA-256) or nothing"}
	}
	return nil
}

// isHexHash reports whether v is a SHA-256 digest in lowercase hex.
func isHexHash(v string) bool { return lowerhex.Valid(v, 64) }

// normalDetail returns d in its minimal form (nil for none or null). It
// must be valid JSON by RFC 7493 (UTF-8, unique member names).
func normalDetail(d json.RawMessage, max int) (json.RawMessage, error) {
	if len(strings.TrimSpace(string(d))) == 0 {
		return nil, nil
	}
	if len(d) > 4*max+1024 { // not worth formatting
		return nil, &EntryError{"detail", fmt.Sprintf("%d bytes, at most %d", len(d), max)}
	}
	v := jsontext.Value(append([]byte(nil), d...))
	if err := v.Format(); err != nil {
		return nil, &EntryError{"detail", "not valid JSON: " + err.Error()}
	}
	if string(v) == "null" {
		return nil, nil
	}
	if len(v) > max {
		return nil, &EntryError{"detail", fmt.Sprintf("%d bytes, at most %d", len(v), max)}
	}
	return json.RawMessage(v), nil
}

// Hash returns the hash of e: the lowercase hex SHA-256 of this encoding of
// its fields, Seq last, Hash itself excluded:
//
//	str("snapnode-audit-v1")
//	i64(Time as microseconds since 1970-01-01T00:00:00Z)
//	str(Actor) str(Task) str(Action) str(Step) str(Decision) str(Reason)
//	str(PolicyVersion) str(PreHash) str(PostHash) str(Detail) str(Prev)
//	i64(Seq)
//
// where i64(n) is n as 8 bytes big-endian (two's complement) and str(s) is
// the length of s in bytes as 4 bytes big-endian followed by the bytes of s
// (UTF-8). Detail is the bytes of the detail value exactly as stored and
// exported (empty when there is none); Prev is 64 hex characters. Every
// field has its length or a fixed size, so no two entries share an
// encoding.
func Hash(e Entry) string {
	var buf [512]byte
	sum := sha256.Sum256(appendEncoding(buf[:0], e))
	return hex.EncodeToString(sum[:])
}

// appendEncoding appends the encoding Hash hashes; the Seq is its last 8
// bytes, which lets Verify ask cheaply at which seq an entry would have
// been genuine.
func appendEncoding(b []byte, e Entry) []byte {
	b = appendStr(b, hashDomain)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time.UnixMicro()))
	for _, s := range [...]string{e.Actor, e.Task, e.Action, string(e.Step), e.Decision, e.Reason,
		e.PolicyVersion, e.PreHash, e.PostHash} {
		b = appendStr(b, s)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Detail)))
	b = append(b, e.Detail...)
	b = appendStr(b, e.Prev)
	return binary.BigEndian.AppendUint64(b, uint64(e.Seq))
}

// appendStr appends s with its length, 4 bytes big-endian, before it.
func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
