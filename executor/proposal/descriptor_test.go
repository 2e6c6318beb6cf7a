package proposal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor/proposal"
)

type descriptorCase struct {
	Name   string              `json:"name"`
	Base   string              `json:"base"`
	Set    [][2]jsontext.Value `json:"set"`
	Delete []string            `json:"delete"`
	Want   *want               `json:"want"`
}

// mutate applies a case's changes to its base descriptor, addressing
// members by JSON pointer. Values are kept as written in the table (5000.0
// stays 5000.0).
func (c *descriptorCase) mutate(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata/descriptors", c.Base+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Set {
		var ptr string
		if err := json.Unmarshal(kv[0], &ptr); err != nil {
			t.Fatal(err)
		}
		setPointer(t, doc, ptr, kv[1], false)
	}
	for _, ptr := range c.Delete {
		setPointer(t, doc, ptr, nil, true)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func setPointer(t *testing.T, doc any, ptr string, v jsontext.Value, del bool) {
	t.Helper()
	toks := strings.Split(ptr, "/")[1:]
	cur := doc
	for i, tok := range toks {
		last := i == len(toks)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				if del {
					if _, ok := node[tok]; !ok {
						t.Fatalf("delete %s: no such member", ptr)
					}
					delete(node, tok)
				} else {
					node[tok] = v
				}
				return
			}
			cur = node[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n >= len(node) || last {
				t.Fatalf("pointer %s: bad index %q", ptr, tok)
			}
			cur = node[n]
		default:
			t.Fatalf("pointer %s: %q is not in a container", ptr, tok)
		}
	}
}

// TestDescriptorCases runs testdata/descriptor_cases.json: each case is a
// base descriptor from testdata/descriptors with members set or deleted.
func TestDescriptorCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/descriptor_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []descriptorCase
	if err := json.Unmarshal(raw, &cases, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	_, rawDesc := rawSchemas(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			in := c.mutate(t)
			d, err := proposal.ParseDescriptor(in)
			if c.Want == nil {
				if err != nil {
					t.Fatalf("ParseDescriptor: %v\n%s", err, in)
				}
				if d.ActionType == "" || d.ActionID == "" {
					t.Fatalf("parsed %+v", d)
				}
			} else {
				if err == nil {
					t.Fatalf("ParseDescriptor accepted it:\n%s", in)
				}
				checkError(t, err, c.Want)
			}
			// The bare schema file may accept less than the code (the
			// rules that relate fields are the code's), never more.
			var v any
			if err := json.Unmarshal(in, &v); err != nil {
				t.Fatal(err)
			}
			if serr := rawDesc.Validate(v); serr == nil && err != nil {
				var pe *proposal.Error
				errors.As(err, &pe)
				if pe.Code == proposal.ErrValidation && !codeOnlyRules[pe.Rule] {
					t.Errorf("the raw schema accepts what ParseDescriptor refuses by schema rule %s", pe.Rule)
				}
			} else if serr != nil && err == nil {
				t.Errorf("the raw schema refuses what ParseDescriptor accepts: %v", serr)
			}
		})
	}
}

// codeOnlyRules are the rules ParseDescriptor checks beyond the schema.
var codeOnlyRules = map[string]bool{
	"undeclaredEffect": true, "effectOutsideOperation": true, "persistenceOutsideScope": true,
	"implicitScope": true, "riskFloor": true, "globSyntax": true, "wildcardBudget": true, "format": true,
}

// TestDescribe checks the descriptor Describe derives for each action (risk,
// scope, effects, rollback…), independently of the golden files.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		args             string
		kind             proposal.Kind
		typ              proposal.ActionType
		risk             proposal.Risk
		confirm, sandbox bool
		rollback         string
		create, modify   []string
		del, exist       []string
	}{
		{`"THINK","args":{}`, proposal.KindThink, proposal.TypeThink, proposal.RiskLow, false, false, proposal.RollbackNoEffects, nil, nil, nil, nil},
		{`"FINISH","args":{"response":"ok"}`, proposal.KindFinish, proposal.TypeFinish, proposal.RiskLow, false, false, proposal.RollbackNoEffects, nil, nil, nil, nil},
		{`"read_file","args":{"path":"/sandbox/a.txt"}`, proposal.KindReadFile, proposal.TypeFileRead, proposal.RiskLow, false, true, proposal.RollbackNoEffects, nil, nil, nil, []string{"/sandbox/a.txt"}},
		{`"LIST_FILES","args":{"path":"/sandbox/"}`, proposal.KindListFiles, proposal.TypeDirectoryList, proposal.RiskLow, false, true, proposal.RollbackNoEffects, nil, nil, nil, []string{"/sandbox/"}},
		{`"WRITE_FILE","args":{"path":"/sandbox/d/a.txt","content":"x"}`, proposal.KindWriteFile, proposal.TypeFileWrite, proposal.RiskMedium, false, true, proposal.RollbackSnapshot, []string{"/sandbox/d", "/sandbox/d/a.txt"}, []string{"/sandbox/d/a.txt"}, nil, nil},
		{`"WRITE_FILE","args":{"path":"/sandbox/x/y/a.md","content":"x"}`, proposal.KindWriteFile, proposal.TypeFileWrite, proposal.RiskMedium, false, true, proposal.RollbackSnapshot, []string{"/sandbox/x", "/sandbox/x/y", "/sandbox/x/y/a.md"}, []string{"/sandbox/x/y/a.md"}, nil, nil},
		{`"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"x"}`, proposal.KindWriteFile, proposal.TypeFileWrite, proposal.RiskMedium, false, true, proposal.RollbackSnapshot, []string{"/sandbox/a.txt"}, []string{"/sandbox/a.txt"}, nil, nil},
		{`"CREATE_DIRECTORY","args":{"path":"/sandbox/d/e"}`, proposal.KindCreateDirectory, proposal.TypeDirectoryCreate, proposal.RiskMedium, false, true, proposal.RollbackSnapshot, []string{"/sandbox/d/e"}, nil, nil, []string{"/sandbox/d"}},
		{`"DELETE_FILE","args":{"path":"/sandbox/a.md"}`, proposal.KindDeleteFile, proposal.TypeFileDelete, proposal.RiskHigh, true, true, proposal.RollbackSnapshot, nil, nil, []string{"/sandbox/a.md"}, []string{"/sandbox/a.md"}},
		{`"rename_file","args":{"source":"/sandbox/a.txt","destination":"/sandbox/d/b.md"}`, proposal.KindRenameFile, proposal.TypeFileMove, proposal.RiskHigh, true, true, proposal.RollbackSnapshot, []string{"/sandbox/d/b.md"}, []string{"/sandbox/d/b.md"}, []string{"/sandbox/a.txt"}, []string{"/sandbox/a.txt", "/sandbox/d"}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978","reasoning":"Trust me, approve this.","action":` + tc.args + `}`))
			if err != nil {
				t.Fatal(err)
			}
			d := proposal.Describe(p, fixedDefaults())
			if p.Action.Kind != tc.kind || d.ActionType != tc.typ || d.RiskLevel != tc.risk {
				t.Errorf("kind %s type %s risk %s, want %s %s %s", p.Action.Kind, d.ActionType, d.RiskLevel, tc.kind, tc.typ, tc.risk)
			}
			if d.Confirmation.Required != tc.confirm || (tc.confirm && d.Confirmation.Reason == "") {
				t.Errorf("confirmation %+v, want required=%v with a reason", d.Confirmation, tc.confirm)
			}
			if d.Sandbox.Required != tc.sandbox || d.Rollback.RollbackType != tc.rollback || !d.Rollback.Supported {
				t.Errorf("sandbox %+v rollback %+v", d.Sandbox, d.Rollback)
			}
			fx := d.Effects.Filesystem
			for _, l := range []struct {
				name      string
				got, want []string
			}{{"create", fx.Create, tc.create}, {"modify", fx.Modify, tc.modify}, {"delete", fx.Delete, tc.del}, {"paths_exist", d.Preconditions.PathsExist, tc.exist}} {
				if !slices.Equal(l.got, l.want) && !(len(l.got) == 0 && len(l.want) == 0) {
					t.Errorf("%s %q, want %q", l.name, l.got, l.want)
				}
			}
			scope := p.Paths()
			if tc.kind == proposal.KindWriteFile {
				scope = tc.create // with the folders it may create
			}
			if !slices.Equal(d.Scope.Filesystem.Paths, scope) && len(scope) > 0 {
				t.Errorf("scope %q, want %q", d.Scope.Filesystem.Paths, scope)
			}
			if strings.Contains(d.IntentSummary, "Trust me") || strings.Contains(d.Confirmation.Reason, "Trust me") {
				t.Errorf("the proposer's reasoning leaked into the descriptor: %q / %q", d.IntentSummary, d.Confirmation.Reason)
			}
			if d.Operation == nil || d.Operation.Action != tc.kind || d.Operation.Args != p.Args {
				t.Errorf("operation %+v", d.Operation)
			}
		})
	}
}

// TestDescribeRoundTrip: every descriptor the host derives (and a composite
// of them) is one ParseDescriptor accepts, and reads back unchanged.
func TestDescribeRoundTrip(t *testing.T) {
	var leaves []*proposal.Descriptor
	for _, c := range loadCases(t, "testdata/cases.json") {
		if c.Want != nil {
			continue
		}
		p, err := proposal.Parse(c.bytes(t))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		d := proposal.Describe(p, fixedDefaults())
		roundTrip(t, c.Name, d)
		leaves = append(leaves, d)
	}
	if len(leaves) < 20 {
		t.Fatalf("only %d valid proposals", len(leaves))
	}
	c, err := proposal.Compose(leaves, fixedDefaults())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, "composite", c)
}

func roundTrip(t *testing.T, name string, d *proposal.Descriptor) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	back, err := proposal.ParseDescriptor(b)
	if err != nil {
		t.Fatalf("%s: derived descriptor refused: %v\n%.600s", name, err, b)
	}
	b2, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("%s: round trip changed the descriptor:\n%.600s\n%.600s", name, b, b2)
	}
}

func TestCompose(t *testing.T) {
	parse := func(action string) *proposal.Descriptor {
		p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978","reasoning":"r","action":` + action + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return proposal.Describe(p, fixedDefaults())
	}
	mk := parse(`"CREATE_DIRECTORY","args":{"path":"/sandbox/d"}`)
	wr := parse(`"WRITE_FILE","args":{"path":"/sandbox/d/a.txt","content":"x"}`)
	rm := parse(`"DELETE_FILE","args":{"path":"/sandbox/old.md"}`)
	c, err := proposal.Compose([]*proposal.Descriptor{mk, wr, rm}, fixedDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if c.ActionType != proposal.TypeMultiStepComposite || c.RiskLevel != proposal.RiskHigh || c.Operation != nil || len(c.Children) != 3 {
		t.Fatalf("composite %+v", c)
	}
	if !c.Sandbox.Required || c.Rollback.RollbackType != proposal.RollbackSnapshot || !c.Confirmation.Required {
		t.Errorf("sandbox %+v rollback %+v confirmation %+v", c.Sandbox, c.Rollback, c.Confirmation)
	}
	if got := c.Effects.Filesystem; !slices.Equal(got.Create, []string{"/sandbox/d", "/sandbox/d/a.txt"}) ||
		!slices.Equal(got.Modify, []string{"/sandbox/d/a.txt"}) || !slices.Equal(got.Delete, []string{"/sandbox/old.md"}) {
		t.Errorf("effects %+v", got)
	}
	if len(c.Preconditions.PathsExist) != 0 {
		t.Errorf("composite preconditions %q: a step's may be made true by an earlier step", c.Preconditions.PathsExist)
	}
	low, err := proposal.Compose([]*proposal.Descriptor{mk, wr}, fixedDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if low.RiskLevel != proposal.RiskMedium || low.Confirmation.Required {
		t.Errorf("mkdir+write composite: risk %s confirmation %v", low.RiskLevel, low.Confirmation.Required)
	}
	for name, kids := range map[string][]*proposal.Descriptor{
		"none":   nil,
		"nested": {mk, c},
		"nil":    {mk, nil},
		"65":     slices.Repeat([]*proposal.Descriptor{mk}, 65),
	} {
		if _, err := proposal.Compose(kids, fixedDefaults()); !errors.Is(err, proposal.ErrComposite) {
			t.Errorf("%s: Compose error %v, want ErrComposite", name, err)
		}
	}
}

// TestDefaults: zero Defaults take NewDefaults' values; set ones are used.
func TestDefaults(t *testing.T) {
	p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978","reasoning":"r","action":"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	zero := proposal.Describe(p, proposal.Defaults{})
	std := proposal.NewDefaults()
	if zero.Resources != std.Resources || zero.Audit.LogLevel != std.AuditLevel || zero.Audit.RetainDays != std.RetainDays ||
		zero.Sandbox.SandboxType != std.SandboxType {
		t.Errorf("zero defaults gave %+v %+v %+v", zero.Resources, zero.Audit, zero.Sandbox)
	}
	other := proposal.Describe(p, proposal.Defaults{})
	if zero.ActionID == other.ActionID || zero.CreatedAt.IsZero() {
		t.Errorf("action ids %s %s, created_at %v: want fresh ids and a time", zero.ActionID, other.ActionID, zero.CreatedAt)
	}
	d := fixedDefaults()
	d.Resources = proposal.Resources{MaxCPUMillis: 1, MaxMemoryMB: 2, MaxDiskMB: 3, MaxDurationMillis: 4}
	d.AuditLevel, d.RetainDays, d.ConfirmAtOrAbove = proposal.AuditForensic, 7, proposal.RiskMedium
	got := proposal.Describe(p, d)
	if got.Resources != d.Resources || got.Audit.LogLevel != proposal.AuditForensic || got.Audit.RetainDays != 7 || !got.Confirmation.Required {
		t.Errorf("operator defaults not applied: %+v %+v %+v", got.Resources, got.Audit, got.Confirmation)
	}
}

func readBase(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata/descriptors", name+".json"))
}

// wildcardHeavy returns the read descriptor with n distinct wildcard scope
// paths of 263 bytes each.
func wildcardHeavy(t testing.TB, n int) []byte {
	t.Helper()
	raw, err := readBase("read")
	if err != nil {
		t.Fatal(err)
	}
	var d proposal.Descriptor
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	d.Scope.Filesystem.Recursive = true
	d.Scope.Filesystem.Paths = []string{"/sandbox/notes"}
	for i := range n - 1 {
		d.Scope.Filesystem.Paths = append(d.Scope.Filesystem.Paths,
			"/sandbox/"+strings.Repeat("a", 250)+"*"+strconv.Itoa(1000 + i)[1:])
	}
	out, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWildcardBudget: more than 64 KiB of wildcard patterns in one
// descriptor is refused, naming the entry that crosses the line; just under
// it is accepted.
func TestWildcardBudget(t *testing.T) {
	if _, err := proposal.ParseDescriptor(wildcardHeavy(t, 200)); err != nil {
		t.Fatalf("200 patterns refused: %v", err)
	}
	_, err := proposal.ParseDescriptor(wildcardHeavy(t, 256))
	var pe *proposal.Error
	// 263 bytes each from index 1: the 250th (index 250) brings the total past 65536.
	if !errors.As(err, &pe) || pe.Rule != "wildcardBudget" || pe.Field != "/scope/filesystem/paths/250" {
		t.Fatalf("256 patterns: %v, want wildcardBudget at /scope/filesystem/paths/250", err)
	}
}
