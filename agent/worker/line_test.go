package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/agent/worker"
)

// The worker answer examples of the schema are what ParseLine accepts and
// refuses, and each refusal names its rule.
func TestParseLine(t *testing.T) {
	for _, kind := range []string{"valid", "invalid"} {
		paths, _ := filepath.Glob(filepath.Join("..", "..", "schemas", "testdata", "worker-answer", kind, "*.json"))
		if len(paths) == 0 {
			t.Fatal("no examples")
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = worker.ParseLine([]byte(strings.TrimSpace(string(b))), 1<<20)
			if (err == nil) != (kind == "valid") {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
	for _, c := range []struct{ line, rule string }{
		{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x"} {}`, "json"},
		{"```json\n{}", "object"},
		{`{"schema_version":"1.0.0","schema_version":"1.0.0","action":"THINK"}`, "json"},
		{"{\"a\":\"\xff\"}", "utf8"},
		{`{"schema_version":"1.0.0"}`, "schema"},
		{`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"` + strings.Repeat("x", 100) + `"}`, "size"},
	} {
		_, err := worker.ParseLine([]byte(c.line), 64)
		le, ok := err.(*worker.LineError)
		if c.rule == "size" {
			_, err = worker.ParseLine([]byte(c.line), 64)
			le, ok = err.(*worker.LineError)
		} else {
			_, err = worker.ParseLine([]byte(c.line), 1<<20)
			le, ok = err.(*worker.LineError)
		}
		if !ok || le.Rule != c.rule {
			t.Errorf("%q: %v; want rule %s", c.line, err, c.rule)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "schemas", "testdata", "worker-answer", "*", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, line []byte) {
		ans, err := worker.ParseLine(line, 4096)
		if (ans == nil) == (err == nil) {
			t.Fatalf("answer %v and error %v", ans, err)
		}
		if err != nil {
			if _, ok := err.(*worker.LineError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if len(line) > 4096 || (ans.Kind != "proposal" && ans.Kind != "agent_response") || ans.Action == "" {
			t.Fatalf("accepted %q as %+v", line, ans)
		}
	})
}

// AnswerStep takes an answer's step member off, names a malformed one,
// and leaves a line without one (or not one object) as it is.
func TestAnswerStep(t *testing.T) {
	for _, c := range []struct {
		line, rest string
		step       int
		named      bool
		rule       string
	}{
		{`{"action":"THINK","step":3,"args":{"step":1}}`, `{"action":"THINK","args":{"step":1}}`, 3, true, ""},
		{`{"st\u0065p":0, "action":"COMPLETED"}`, `{"action":"COMPLETED"}`, 0, true, ""},
		{`{"action":"THINK","args":{"step":1}}`, `{"action":"THINK","args":{"step":1}}`, 0, false, ""},
		{`{"step":1,"step":2}`, "", 0, false, "step"},
		{`{"step":1,"st\u0065p":1}`, "", 0, false, "step"},
		{`{"action":"THINK","step":0,"args":{},"step":0}`, "", 0, false, "step"},
		{`{"a":1,"a":2,"step":1}`, `{"a":1,"a":2,"step":1}`, 0, false, ""},             // ParseLine refuses it (json)
		{`{"args":{"step":1,"step":2}}`, `{"args":{"step":1,"step":2}}`, 0, false, ""}, // ParseLine refuses it (json)
		{`{"step":01}`, `{"step":01}`, 0, false, ""},                                   // ParseLine refuses it (json)
		{"{\"st\xffep\":1,\"step\":1}", "{\"st\xffep\":1,\"step\":1}", 0, false, ""},   // ParseLine refuses it (utf8)
		{`{"step":-0,"action":"THINK"}`, `{"action":"THINK"}`, 0, true, ""},            // -0 is the integer 0
		{`{"step":9223372036854775808}`, "", 0, false, "step"},
		{`{"step":1E0}`, "", 0, false, "step"},
		{`{"step":1} {}`, `{"step":1} {}`, 0, false, ""}, // ParseLine refuses it (json)
		{`prose`, `prose`, 0, false, ""},
		{`{"step":"1"}`, "", 0, false, "step"},
		{`{"step":-1}`, "", 0, false, "step"},
		{`{"step":1.0}`, "", 0, false, "step"},
		{`{"step":1e2}`, "", 0, false, "step"},
		{`{"step":null}`, "", 0, false, "step"},
	} {
		rest, step, named, err := worker.AnswerStep([]byte(c.line))
		if c.rule != "" {
			le, ok := err.(*worker.LineError)
			if !ok || le.Rule != c.rule || !strings.Contains(le.Message, "at /step") {
				t.Errorf("%s: %v; want rule %s at /step", c.line, err, c.rule)
			}
			continue
		}
		if err != nil || string(rest) != c.rest || step != c.step || named != c.named {
			t.Errorf("%s: %s, %d, %v, %v; want %s, %d, %v", c.line, rest, step, named, err, c.rest, c.step, c.named)
		}
	}
}

// Whatever a worker writes, AnswerStep's rest of a line that names its
// step is one JSON object without a step member at its top, never longer
// than the line: the line's bound holds for what is judged and recorded.
func FuzzAnswerStep(f *testing.F) {
	for _, s := range []string{
		`{"step":0,"schema_version":"1.0.0","action":"THINK","args":{"step":1}}`,
		`{"st\u0065p":2, "a" : [1, {"step":3}] }`,
		`{"step":1,"step":2}`,
		`{"step":-0}`,
		"{\"step\":1}\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rest, step, named, err := worker.AnswerStep(line)
		if err != nil || !named {
			return
		}
		if step < 0 || len(rest) > len(line) {
			t.Fatalf("%q: step %d, rest %q", line, step, rest)
		}
		var m map[string]jsontext.Value
		if err := json.Unmarshal(rest, &m); err != nil {
			t.Fatalf("%q: rest %q: %v", line, rest, err)
		}
		if _, ok := m["step"]; ok {
			t.Fatalf("%q: rest %q keeps a step", line, rest)
		}
	})
}
