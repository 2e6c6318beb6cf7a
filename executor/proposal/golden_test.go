package proposal_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor/proposal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixedDefaults are NewDefaults with a fixed clock and numbered action ids,
// so that derived descriptors can be compared byte for byte.
func fixedDefaults() proposal.Defaults {
	d := proposal.NewDefaults()
	d.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	n := 0
	d.NewID = func() string { n++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
	return d
}

// outcome is what the golden files hold for one input: the structured
// error, or the parsed proposal with the descriptor the host derives.
func outcome(t *testing.T, raw []byte) []byte {
	t.Helper()
	var v any
	p, err := proposal.Parse(raw)
	if err != nil {
		var pe *proposal.Error
		if !errors.As(err, &pe) {
			t.Fatalf("Parse returned %T (%v), want *proposal.Error", err, err)
		}
		v = pe
	} else {
		v = struct {
			Proposal   *proposal.Proposal   `json:"proposal"`
			Descriptor *proposal.Descriptor `json:"descriptor"`
		}{p, proposal.Describe(p, fixedDefaults())}
	}
	out, err := json.Marshal(v, jsontext.WithIndent("  "))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestGolden runs every example of the proposal field constraints and the
// proposal schema versioning strategy (and one valid proposal per action)
// through Parse and, when valid, Describe.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := outcome(t, raw)
			golden := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// compact reformats JSON without insignificant white space, keeping the
// order of members, so outputs compare byte for byte with the documented
// outputs.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Compact(); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return string(v)
}

// TestVersioningExamples checks that the examples of the proposal schema
// versioning strategy whose runtime output it documents yield exactly that
// output, member order included. The files in testdata/seed-outputs are
// the documented outputs, never rewritten.
func TestVersioningExamples(t *testing.T) {
	seedOut := func(t *testing.T, name string) string {
		b, err := os.ReadFile(filepath.Join("testdata/seed-outputs", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return compact(t, b)
	}
	input := func(t *testing.T, name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata/golden", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		code proposal.Code
	}{
		{"seed004-example1", proposal.ErrVersionIncompatible},
		{"seed004-example3", proposal.ErrActionNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proposal.Parse(input(t, tc.name))
			if !errors.Is(err, tc.code) {
				t.Fatalf("Parse: %v, want %s", err, tc.code)
			}
			out, err := json.Marshal(err)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(out), seedOut(t, tc.name); got != want {
				t.Errorf("output\n%s\nwant (seed 004)\n%s", got, want)
			}
		})
	}
	t.Run("seed004-example2-completed", func(t *testing.T) {
		p, err := proposal.Parse(input(t, "seed004-example2-completed"))
		if err != nil {
			t.Fatal(err)
		}
		// The executor reads /sandbox/a.txt; the example assumes it holds
		// "hello world\n".
		out, err := json.Marshal(proposal.ReadFileSuccess(p, "hello world\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(out), seedOut(t, "seed004-example2-completed"); got != want {
			t.Errorf("output\n%s\nwant (seed 004)\n%s", got, want)
		}
	})
	// Example 2 as the versioning strategy writes it lacks id and reasoning
	// and reads /tmp: the proposal field constraints make it a validation
	// error that names a field.
	t.Run("seed004-example2", func(t *testing.T) {
		_, err := proposal.Parse(input(t, "seed004-example2"))
		var pe *proposal.Error
		if !errors.As(err, &pe) || pe.Code != proposal.ErrValidation || pe.Field != "/reasoning" || pe.Rule != "required" {
			t.Fatalf("Parse: %#v, want VALIDATION_ERROR /reasoning required", err)
		}
	})
}
