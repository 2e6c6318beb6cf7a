package proposal_test

import (
	"encoding/base64"
	"errors"
	"os"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/proposal"
)

// TestClassify reads testdata/classify.json: what each input is, from its
// top-level names alone.
func TestClassify(t *testing.T) {
	raw, err := os.ReadFile("testdata/classify.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name      string `json:"name"`
		Raw       string `json:"raw"`
		RawBase64 string `json:"raw_base64"`
		Want      string `json:"want"`
	}
	if err := json.Unmarshal(raw, &cases, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			data := []byte(c.Raw)
			if c.RawBase64 != "" {
				if data, err = base64.StdEncoding.DecodeString(c.RawBase64); err != nil {
					t.Fatal(err)
				}
			}
			if got := proposal.Classify(data).String(); got != c.Want {
				t.Fatalf("Classify(%q) = %s, want %s", data, got, c.Want)
			}
		})
	}
}

// TestProposalWithoutVersion: what Classify calls a proposal for its
// action and args is refused by Parse naming /schema_version, never
// taken for plain data.
func TestProposalWithoutVersion(t *testing.T) {
	data := []byte(`{"id":"7f1c7c3e-2b4a-4f7e-9c1d-1a2b3c4d5e6f","reasoning":"read","action":"READ_FILE","args":{"path":"/sandbox/a.txt"}}`)
	if f := proposal.Classify(data); f != proposal.FormatProposal {
		t.Fatalf("Classify = %s, want proposal", f)
	}
	_, err := proposal.Parse(data)
	var pe *proposal.Error
	if !errors.As(err, &pe) || !errors.Is(err, proposal.ErrValidation) || pe.Field != "/schema_version" || pe.Rule != "required" {
		t.Fatalf("Parse: %v, want a validation error on /schema_version (required)", err)
	}
}

// FuzzClassify: Classify never panics and, on every strict JSON input,
// agrees with a plain reading of the top-level members: schema_version
// makes a proposal, then descriptor_version a descriptor, then action
// with args a proposal; anything else is data.
func FuzzClassify(f *testing.F) {
	raw, err := os.ReadFile("testdata/classify.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases []struct {
		Raw string `json:"raw"`
	}
	if err := json.Unmarshal(raw, &cases, json.RejectUnknownMembers(false)); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add([]byte(c.Raw))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := proposal.Classify(data)
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		has := func(name string) bool { _, ok := obj[name]; return ok }
		want := proposal.FormatData
		switch {
		case obj == nil:
		case has("schema_version"):
			want = proposal.FormatProposal
		case has("descriptor_version"):
			want = proposal.FormatDescriptor
		case has("action") && has("args"):
			want = proposal.FormatProposal
		}
		if got != want {
			t.Fatalf("Classify(%q) = %s, want %s", data, got, want)
		}
	})
}
