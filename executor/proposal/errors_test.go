package proposal_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/proposal"
)

// TestErrorJSON: each code has exactly its members, in the order of the
// proposal schema versioning strategy's examples, and reads back the same.
func TestErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		err  *proposal.Error
		want string
	}{
		{&proposal.Error{Code: proposal.ErrVersionIncompatible, Message: "Unsupported proposal schema version.",
			ReceivedVersion: "2.0.0", SupportedVersionRange: "1.x.x", Field: "/schema_version"},
			`{"error_code":"SCHEMA_VERSION_INCOMPATIBLE","message":"Unsupported proposal schema version.","received_version":"2.0.0","supported_version_range":"1.x.x"}`},
		{&proposal.Error{Code: proposal.ErrActionNotAllowed, Message: "m", Field: "/action"},
			`{"error_code":"ACTION_NOT_ALLOWED","message":"m"}`},
		{&proposal.Error{Code: proposal.ErrActionNotAllowed, Message: "m", Field: "/sandbox/sandbox_type", Available: []string{"os_root"}},
			`{"error_code":"ACTION_NOT_ALLOWED","message":"m","field":"/sandbox/sandbox_type","available":["os_root"]}`},
		{&proposal.Error{Code: proposal.ErrValidation, Message: "m", Field: "", Rule: "type"},
			`{"error_code":"VALIDATION_ERROR","message":"m","field":"","rule":"type"}`},
		{&proposal.Error{Code: proposal.ErrValidation, Message: "<&>", Field: "/args/a~1b", Rule: "pattern"},
			`{"error_code":"VALIDATION_ERROR","message":"<&>","field":"/args/a~1b","rule":"pattern"}`},
	} {
		got, err := json.Marshal(tc.err)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		var back proposal.Error
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(&back)
		if string(again) != tc.want {
			t.Errorf("round trip: %s", again)
		}
	}
	var e proposal.Error
	if err := json.Unmarshal([]byte(`{"error_code":"ACTION_NOT_ALLOWED","message":"m","hint":"x"}`), &e); err == nil {
		t.Error("unknown member accepted")
	}
}

// TestErrorIs: errors.Is matches the code, through wrapping, and nothing
// else; Unwrap reaches the JSON cause.
func TestErrorIs(t *testing.T) {
	_, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","action":"spawn_process","args":{}}`))
	wrapped := fmt.Errorf("task 7: %w", err)
	if !errors.Is(wrapped, proposal.ErrActionNotAllowed) {
		t.Fatalf("%v is not ErrActionNotAllowed", wrapped)
	}
	if errors.Is(wrapped, proposal.ErrValidation) || errors.Is(wrapped, proposal.ErrVersionIncompatible) {
		t.Fatalf("%v matches another code", wrapped)
	}
	var pe *proposal.Error
	if !errors.As(wrapped, &pe) || pe.Field != "/action" {
		t.Fatalf("field %q, want /action", pe.Field)
	}
	_, err = proposal.Parse([]byte(`{"a":1,"a":2}`))
	var cause interface{ Unwrap() error }
	if !errors.As(err, &cause) || cause.Unwrap() == nil || !errors.Is(err, proposal.ErrValidation) {
		t.Fatalf("duplicate-name error %v has no cause", err)
	}
}

// TestOutput: the success output's shape, members in order, the action as
// the proposer spelled it.
func TestOutput(t *testing.T) {
	for _, tc := range []struct {
		action string
		out    func(*proposal.Proposal) *proposal.Output
		want   string
	}{
		{`"read_file","args":{"path":"/sandbox/a.txt"}`,
			func(p *proposal.Proposal) *proposal.Output { return proposal.ReadFileSuccess(p, "hello world\n") },
			`{"status":"success","action":"read_file","result":{"content":"hello world\n"}}`},
		{`"READ_FILE","args":{"path":"/sandbox/a.txt"}`,
			func(p *proposal.Proposal) *proposal.Output { return proposal.ReadFileSuccess(p, "") },
			`{"status":"success","action":"READ_FILE","result":{"content":""}}`},
		{`"think","args":{}`,
			func(p *proposal.Proposal) *proposal.Output { return proposal.Success(p, nil) },
			`{"status":"success","action":"think","result":{}}`},
		{`"FINISH","args":{"response":"done"}`,
			func(p *proposal.Proposal) *proposal.Output {
				return proposal.Success(p, map[string]string{"response": p.Args.Response})
			},
			`{"status":"success","action":"FINISH","result":{"response":"done"}}`},
	} {
		p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978","reasoning":"r","action":` + tc.action + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(tc.out(p))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// TestProposalRoundTrip: a parsed proposal written back parses to the same
// value, for every valid case.
func TestProposalRoundTrip(t *testing.T) {
	for _, c := range loadCases(t, "testdata/cases.json") {
		if c.Want != nil {
			continue
		}
		p, err := proposal.Parse(c.bytes(t))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := proposal.Parse(b)
		if err != nil {
			t.Fatalf("%s: written back and refused: %v\n%s", c.Name, err, b)
		}
		if *p != *q {
			t.Fatalf("%s: %+v became %+v", c.Name, p, q)
		}
	}
}

// TestSpellings: an action is accepted in upper case and in lower case, and
// the parsed kind is canonical whatever the spelling.
func TestSpellings(t *testing.T) {
	for _, k := range proposal.Kinds() {
		for _, spelling := range []string{string(k), strings.ToLower(string(k))} {
			args := `{}`
			switch k {
			case proposal.KindFinish:
				args = `{"response":"ok"}`
			case proposal.KindRenameFile:
				args = `{"source":"/sandbox/a.md","destination":"/sandbox/b.txt"}`
			case proposal.KindWriteFile:
				args = `{"path":"/sandbox/a.txt","content":"x"}`
			case proposal.KindReadFile, proposal.KindListFiles, proposal.KindCreateDirectory, proposal.KindDeleteFile:
				args = `{"path":"/sandbox/a.md"}`
			}
			p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978","reasoning":"r","action":"` + spelling + `","args":` + args + `}`))
			if err != nil {
				t.Fatalf("%s: %v", spelling, err)
			}
			if p.Action.Kind != k || p.Action.Spelling != spelling {
				t.Errorf("%s parsed as %+v", spelling, p.Action)
			}
		}
	}
}
