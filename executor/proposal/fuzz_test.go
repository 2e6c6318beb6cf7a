package proposal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/proposal"
)

// checkTyped fails unless err is a well-formed *proposal.Error.
func checkTyped(t *testing.T, err error) *proposal.Error {
	t.Helper()
	var pe *proposal.Error
	if !errors.As(err, &pe) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
	switch pe.Code {
	case proposal.ErrValidation:
		if pe.Rule == "" {
			t.Fatalf("validation error without rule: %v", err)
		}
	case proposal.ErrVersionIncompatible:
		if pe.ReceivedVersion == "" || pe.SupportedVersionRange == "" {
			t.Fatalf("version error without versions: %v", err)
		}
	case proposal.ErrActionNotAllowed:
	default:
		t.Fatalf("unknown code %q", pe.Code)
	}
	if pe.Message == "" {
		t.Fatalf("empty message: %#v", pe)
	}
	if _, err := json.Marshal(pe); err != nil {
		t.Fatalf("error does not serialize: %v", err)
	}
	return pe
}

// FuzzParse: Parse never panics, fails only with a typed error, gives the
// raw schema file's verdict on every strict JSON input, and what it accepts
// survives a round trip and yields a descriptor ParseDescriptor accepts.
func FuzzParse(f *testing.F) {
	prop, _ := rawSchemas(f)
	f.Add([]byte(`{"schema_version":"1.0.1","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b","reasoning":"r","action":"WRITE_FILE","args":{"path":"/sandbox/log.txt","content":"Hello World!"}}`))
	f.Add([]byte(`{"schema_version":"2.0.0","action":"read_file","args":{"path":"/tmp/a.txt"}}`))
	f.Add([]byte(`{"schema_version":"1.2.0","action":"run_command","args":{"command":"rm -rf /"}}`))
	f.Add([]byte(`{"schema_version":"1.0.0","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b","reasoning":"r","action":"rename_file","args":{"source":"/sandbox/a.txt","destination":"/sandbox/b.md"}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte("{\"schema_version\":\"1.0.0\",\"reasoning\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := proposal.Parse(raw)
		var v any
		strict := json.Unmarshal(raw, &v) == nil
		if strict {
			if serr := prop.Validate(v); (serr == nil) != (err == nil) {
				t.Fatalf("Parse says %v, the raw schema says %v", err, serr)
			}
		}
		if err != nil {
			checkTyped(t, err)
			return
		}
		if !strict {
			t.Fatalf("accepted input that is not strict JSON: %q", raw)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := proposal.Parse(b)
		if err != nil || *q != *p {
			t.Fatalf("round trip: %v, %+v became %+v", err, p, q)
		}
		d := proposal.Describe(p, fixedDefaults())
		db, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proposal.ParseDescriptor(db); err != nil {
			t.Fatalf("derived descriptor refused: %v\n%s", err, db)
		}
	})
}

// FuzzParseDescriptor: ParseDescriptor never panics, fails only with a
// typed error, accepts nothing the raw schema refuses, and what it accepts
// reads back byte for byte the same once written.
func FuzzParseDescriptor(f *testing.F) {
	_, desc := rawSchemas(f)
	for _, name := range []string{"write", "rename", "composite", "peer-glob-delete"} {
		b, err := readBase(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"descriptor_version":"2.0"}`))
	f.Add([]byte(`{"descriptor_version":"1.0","action_type":"COMMAND_EXECUTION"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := proposal.ParseDescriptor(raw)
		if err != nil {
			checkTyped(t, err)
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("accepted input that is not strict JSON: %v", err)
		}
		if err := desc.Validate(v); err != nil {
			t.Fatalf("accepted what the raw schema refuses: %v", err)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := proposal.ParseDescriptor(b)
		if err != nil {
			t.Fatalf("written back and refused: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(back)
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed it:\n%s\n%s", b, b2)
		}
	})
}
