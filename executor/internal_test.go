package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestUndeclaredEffectsBlocked: staged changes beyond the declared
// effects are blocked for good. Derived and peer descriptors always
// declare what their operations do, so the check is reached here by
// narrowing the declaration by hand.
func TestUndeclaredEffectsBlocked(t *testing.T) {
	sb, err := sandbox.Open(t.TempDir(), sandbox.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	db, err := sqldb.Open(context.Background(), testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background(), migrations()); err != nil {
		t.Fatal(err)
	}
	e := &Executor{sb: sb, store: store{db: db, d: db.Dialect}, quotas: DefaultQuotas(),
		now: time.Now, newID: uuid.NewString, defaults: proposal.NewDefaults(), cpu: threadCPU}
	data := []byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b","reasoning":"r",` +
		`"action":"WRITE_FILE","args":{"path":"/sandbox/x.txt","content":"x"}}`)
	for _, tc := range []struct {
		name   string
		narrow func(*proposal.FilesystemEffects)
	}{
		{"nothing declared", func(fx *proposal.FilesystemEffects) { fx.Create, fx.Modify = nil, nil }},
		{"only modify declared", func(fx *proposal.FilesystemEffects) { fx.Create = nil }},
		{"another path declared", func(fx *proposal.FilesystemEffects) { fx.Create = []string{"/sandbox/y.txt"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, err := e.parse(data, "a1")
			if err != nil {
				t.Fatal(err)
			}
			if _, f, err := e.stage(context.Background(), it, "bc1ptest"); f != nil || err != nil {
				t.Fatalf("as derived: failure %+v, err %v", f, err)
			}
			tc.narrow(&it.desc.Effects.Filesystem)
			_, f, err := e.stage(context.Background(), it, "bc1ptest")
			if err != nil {
				t.Fatal(err)
			}
			if f == nil || f.Code != CodeUndeclaredEffects || len(f.Paths) != 1 || f.Paths[0] != "/sandbox/x.txt" {
				out, _ := json.Marshal(f)
				t.Fatalf("failure %s, want UNDECLARED_EFFECTS on /sandbox/x.txt", out)
			}
		})
	}
}

// TestClean: text for the audit log is made valid, not refused.
func TestClean(t *testing.T) {
	for _, tc := range []struct {
		in        string
		max       int
		multiline bool
		want      string
	}{
		{"plain", 10, false, "plain"},
		{"a\x00b\nc", 10, false, "a b c"},
		{"a\x00b\nc\td", 10, true, "a b\nc\td"},
		{"bad\xffutf8", 20, false, "bad\uFFFDutf8"},
		{"0123456789", 6, false, "012…"},
		{"ééééé", 8, false, "éé…"},
	} {
		if got := clean(tc.in, tc.max, tc.multiline); got != tc.want || len(got) > tc.max {
			t.Errorf("clean(%q, %d, %v) = %q, want %q", tc.in, tc.max, tc.multiline, got, tc.want)
		}
	}
}

// A FORENSIC entry keeps as much of a large diff as fits, marked cut, and
// never loses the paths to the cap on an entry's detail.
func TestTouchedCutsLargeDiff(t *testing.T) {
	big := strings.Repeat("+a line with \"quotes\" and \x01 control\n", 2000)
	d := touched([]sandbox.Diff{{Path: "/sandbox/big.txt", Unified: big}})
	b := detail(d)
	if len(b) > maxDetail || !d.DiffCut || d.Diff == "" || len(d.Paths) != 1 {
		t.Fatalf("%d bytes (cap %d), cut %v, diff %d bytes, %d paths", len(b), maxDetail, d.DiffCut, len(d.Diff), len(d.Paths))
	}
	small := touched([]sandbox.Diff{{Path: "/sandbox/s.txt", Unified: "+x\n"}})
	if small.DiffCut || small.Diff != "+x\n" {
		t.Fatalf("small diff: %+v", small)
	}
}

// Only the risk levels and audit levels the host knows are accepted.
func TestAuditLevelsFilled(t *testing.T) {
	for _, bad := range []AuditLevels{{proposal.RiskLow: "LOUD"}, {"EXTREME": proposal.AuditSummary}, {proposal.RiskHigh: "forensic"}} {
		if _, err := bad.filled(); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	l, err := AuditLevels{proposal.RiskHigh: proposal.AuditDetailed}.filled()
	if err != nil || l.of(proposal.RiskHigh) != proposal.AuditDetailed || l.of(proposal.RiskLow) != proposal.AuditSummary ||
		l.highest() != proposal.AuditForensic {
		t.Fatalf("filled: %v, %v", l, err)
	}
}

// FuzzFilterDetail: whatever detail it is given, a level's filter returns
// nothing or a JSON object holding only members the level keeps.
func FuzzFilterDetail(f *testing.F) {
	f.Add([]byte(`{"paths":[{"path":"/sandbox/a","before":{"kind":"file"}}],"diff":"+x\n","reasoning":"r"}`))
	f.Add([]byte(`{"action":"WRITE_FILE","paths":["/sandbox/a"],"audit_level":"SUMMARY"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"paths":[{"nopath":1}],"a":{"b":[]}}`))
	f.Fuzz(func(t *testing.T, d []byte) {
		for _, level := range []string{proposal.AuditSummary, proposal.AuditDetailed} {
			out := atLevel(audit.Entry{Detail: d}, level).Detail
			if out == nil {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("%s: %q from %q: %v", level, out, d, err)
			}
			for name := range m {
				if level == proposal.AuditSummary && !slices.Contains(summaryMembers, name) ||
					level == proposal.AuditDetailed && slices.Contains(forensicOnly, name) {
					t.Fatalf("%s keeps %q: %s", level, name, out)
				}
			}
		}
	})
}

// TestReadsHold: a composite's read of a file it replaces must have seen
// the content the staging replaces; any other file read, or a listing,
// is not compared.
func TestReadsHold(t *testing.T) {
	old := sandbox.Diff{Path: "/sandbox/a.txt", Before: sandbox.Image{Kind: sandbox.KindFile, SHA256: "aa"}}
	for _, tc := range []struct {
		name    string
		reads   map[int]read
		changed bool
	}{
		{"read what is replaced", map[int]read{0: {path: "/sandbox/a.txt", hash: "aa"}}, false},
		{"read changed since", map[int]read{0: {path: "/sandbox/a.txt", hash: "bb"}}, true},
		{"another file read", map[int]read{0: {path: "/sandbox/b.txt", hash: "bb"}}, false},
		{"a listing", map[int]read{1: {}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := readsHold(tc.reads, []sandbox.Diff{old})
			if got := errors.Is(err, sandbox.ErrChanged); got != tc.changed {
				t.Errorf("err %v, want changed %v", err, tc.changed)
			}
		})
	}
}

// TestHostDescriptorStatesItsAuditLevel: the descriptor the host derives
// says the audit level the host keeps for the action's risk (its levels),
// not a fixed SUMMARY.
func TestHostDescriptorStatesItsAuditLevel(t *testing.T) {
	e := &Executor{levels: DefaultAuditLevels(), defaults: proposal.NewDefaults(), now: time.Now}
	for action, want := range map[string]string{"READ_FILE": proposal.AuditSummary, "WRITE_FILE": proposal.AuditDetailed, "DELETE_FILE": proposal.AuditForensic} {
		path := "/sandbox/a.txt"
		data := fmt.Sprintf(`{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b","reasoning":"r","action":%q,"args":{"path":%q%s}}`,
			action, path, map[bool]string{true: `,"content":"x"`}[action == "WRITE_FILE"])
		it, err := e.parseData([]byte(data), "00000000-0000-4000-8000-000000000000")
		if err != nil {
			t.Fatal(err)
		}
		if got := it.desc.Audit.LogLevel; got != want {
			t.Errorf("%s: log_level %s, want %s", action, got, want)
		}
	}
}

// A path spelled otherwise than its name on disk (a file system that
// ignores case) fails with its own cause, naming the path.
func TestSpellingFailure(t *testing.T) {
	const p = "/sandbox/SECRETS/key.txt"
	f := sandboxFailure(&sandbox.OpError{Op: "read", Path: p, Err: sandbox.ErrSpelling})
	if f.Code != CodeExecutionFailed || f.Cause != "spelling" || !slices.Equal(f.Paths, []string{p}) {
		t.Errorf("failure: %+v, want %s, cause spelling, the path", f, CodeExecutionFailed)
	}
}
