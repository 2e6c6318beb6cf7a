package policy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/explain")

// TestExplainGolden compares Explain with testdata/explain/NAME.golden for
// each case of testdata/explain/cases.json; -update rewrites them.
func TestExplainGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "explain", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string      `json:"name"`
		Policy  string      `json:"policy"`
		Request testRequest `json:"request"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			e := engineFor(t, c.Policy)
			r := c.Request.request()
			got := e.Explain(r)
			golden := filepath.Join("testdata", "explain", c.Name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Explain differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
			// Explain and Decide agree on the effect and the reasons.
			d := e.Decide(t.Context(), r)
			if !strings.Contains(got, "decision: "+strings.ToUpper(d.Effect.String())) {
				t.Errorf("Explain does not state the decision %s", d.Effect)
			}
			for _, reason := range d.Reasons {
				if !strings.Contains(got, "  - "+reason+"\n") {
					t.Errorf("Explain lacks the reason %q", reason)
				}
			}
		})
	}
}

func TestExplainNilEngine(t *testing.T) {
	var e *policy.Engine
	if got := e.Explain(policy.Request{}); !strings.Contains(got, "denied") {
		t.Errorf("nil engine explains %q", got)
	}
}
