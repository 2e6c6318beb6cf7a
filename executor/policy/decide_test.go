package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

// decideFile is one file of testdata/decide (see its README.md).
type decideFile struct {
	Policy string       `json:"policy"`
	Cases  []decideCase `json:"cases"`
}

type decideCase struct {
	Name      string      `json:"name"`
	Request   testRequest `json:"request"`
	Effect    string      `json:"effect"`
	DecidedBy []string    `json:"decided_by"`
	Reasons   []string    `json:"reasons"`
	Sandbox   bool        `json:"sandbox"`
}

type testRequest struct {
	Principal          *string  `json:"principal"`
	Operator           bool     `json:"operator"`
	Action             string   `json:"action"`
	Paths              []string `json:"paths"`
	Risk               string   `json:"risk"`
	Size               int64    `json:"size"`
	RollbackSupported  *bool    `json:"rollback_supported"`
	RecentlyRolledBack bool     `json:"recently_rolled_back"`
}

// request fills the defaults the README describes.
func (tr testRequest) request() policy.Request {
	r := policy.Request{
		Principal:          "bc1pagent",
		Operator:           tr.Operator,
		Action:             tr.Action,
		Paths:              tr.Paths,
		Risk:               tr.Risk,
		Size:               tr.Size,
		RollbackSupported:  true,
		RecentlyRolledBack: tr.RecentlyRolledBack,
	}
	if tr.Principal != nil {
		r.Principal = *tr.Principal
	}
	if tr.RollbackSupported != nil {
		r.RollbackSupported = *tr.RollbackSupported
	}
	if r.Risk == "" {
		switch strings.ToUpper(tr.Action) {
		case policy.ActionWriteFile, policy.ActionCreateDirectory:
			r.Risk = policy.RiskMedium
		case policy.ActionDeleteFile, policy.ActionRenameFile:
			r.Risk = policy.RiskHigh
		default:
			r.Risk = policy.RiskLow
		}
	}
	return r
}

// engineFor loads a policy of testdata/policies, or the default one.
func engineFor(t testing.TB, name string) *policy.Engine {
	t.Helper()
	if name == "default" {
		return policy.Default()
	}
	e, err := policy.Load(filepath.Join("testdata", "policies", name))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDecideTable(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "decide", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no table files: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var df decideFile
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&df); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		e := engineFor(t, df.Policy)
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			for _, c := range df.Cases {
				t.Run(c.Name, func(t *testing.T) {
					d := e.Decide(context.Background(), c.Request.request())
					if got := d.Effect.String(); got != c.Effect {
						t.Errorf("effect %s, want %s; reasons %q", got, c.Effect, d.Reasons)
					}
					if !slices.Equal(d.DecidedBy, c.DecidedBy) {
						t.Errorf("decided by %q, want %q", d.DecidedBy, c.DecidedBy)
					}
					if len(d.Reasons) < len(d.DecidedBy) {
						t.Errorf("%d reasons for %d deciders: %q", len(d.Reasons), len(d.DecidedBy), d.Reasons)
					}
					for _, want := range c.Reasons {
						if !slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, want) }) {
							t.Errorf("no reason contains %q: %q", want, d.Reasons)
						}
					}
					if d.Sandbox != c.Sandbox {
						t.Errorf("sandbox %v, want %v", d.Sandbox, c.Sandbox)
					}
					if d.PolicyVersion != e.Version() || len(d.PolicyVersion) != 16 {
						t.Errorf("policy version %q, engine's %q", d.PolicyVersion, e.Version())
					}
				})
			}
		})
	}
}

// TestLoadedReasonsNameTheFileAlone: a decision's reasons reach the peer
// whose request it decides, so they name the policy file without the
// folders it was loaded from (a user's home, say); errors, read by the
// operator who loads it, keep the path.
func TestLoadedReasonsNameTheFileAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home-of-alice")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.cedar")
	src := "permit (principal, action, resource);\n@id(\"no-secrets\") @reason(\"off limits\")\nforbid (principal, action, resource in Path::\"/sandbox/secrets/\");\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := e.Decide(context.Background(), testRequest{Action: "READ_FILE", Paths: []string{"/sandbox/secrets/key.txt"}}.request())
	if d.Effect != policy.Deny || len(d.Reasons) == 0 {
		t.Fatalf("effect %s, reasons %q: want a denial", d.Effect, d.Reasons)
	}
	for _, r := range d.Reasons {
		if strings.Contains(r, dir) {
			t.Errorf("reason %q names the policy's folder", r)
		}
	}
	if !slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, `"no-secrets" at rules.cedar:2:1`) }) {
		t.Errorf("no reason names the policy by its file's name and place: %q", d.Reasons)
	}
	if err := os.WriteFile(path, []byte(src+"@id(\"no-secrets\")\nforbid (principal, action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = policy.Load(path)
	if err == nil || !strings.Contains(err.Error(), "(first at "+path+":2:1)") {
		t.Errorf("duplicate @id error %v: want the first's place with the file's path", err)
	}
}
