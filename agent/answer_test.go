package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The answers of testdata/answers are named after what ParseAnswer makes
// of them: proposal-*.txt and response-*.txt are accepted as a proposal
// and an agent response; invalid-RULE-*.txt (and invalid-size.txt) are
// refused for breaking RULE.
const answersDir = "testdata/answers"

// answerSmallMax is the size limit of the invalid-size answers; the others are
// read with answerMax.
const (
	answerSmallMax = 64
	answerMax      = 64 << 10
)

// answerActions is the Action of each accepted answer of testdata.
var answerActions = map[string]string{
	"proposal-write.txt":      "WRITE_FILE",
	"proposal-read.txt":       "READ_FILE",
	"proposal-think.txt":      "THINK",
	"proposal-lowercase.txt":  "list_files",
	"proposal-whitespace.txt": "FINISH",
	"proposal-indented.txt":   "RENAME_FILE",
	"response-completed.txt":  ActionCompleted,
	"response-stuck.txt":      ActionStuck,
	"response-retry.txt":      ActionRetry,
	"response-whitespace.txt": ActionCompleted,
}

var answerRules = []string{"size", "json", "object", "kind", "schema"}

func answerFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(answersDir, "*.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatalf("no answers in %s", answersDir)
	}
	return files
}

// answerExpectation reads what a testdata file's name promises: the kind of an
// accepted answer, or the rule a refused one breaks.
func answerExpectation(tb testing.TB, name string) (kind, rule string, max int) {
	tb.Helper()
	base := strings.TrimSuffix(name, ".txt")
	switch {
	case strings.HasPrefix(base, "proposal-"):
		return KindProposal, "", answerMax
	case strings.HasPrefix(base, "response-"):
		return KindAgentResponse, "", answerMax
	case strings.HasPrefix(base, "invalid-"):
		rule, _, _ = strings.Cut(strings.TrimPrefix(base, "invalid-"), "-")
		if !slices.Contains(answerRules, rule) {
			tb.Fatalf("%s: unknown rule %q in the file name", name, rule)
		}
		if rule == "size" {
			return "", rule, answerSmallMax
		}
		return "", rule, answerMax
	}
	tb.Fatalf("%s: the name says neither proposal-, response- nor invalid-RULE-", name)
	return "", "", 0
}

func TestParseAnswerTestdata(t *testing.T) {
	for _, path := range answerFiles(t) {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			kind, rule, max := answerExpectation(t, name)
			a, aerr := ParseAnswer(text, max)
			if rule != "" {
				if aerr == nil {
					t.Fatalf("accepted as %s %s; want refused (%s)", a.Kind, a.Action, rule)
				}
				if a != nil {
					t.Errorf("refused with an answer too: %+v", a)
				}
				if aerr.Rule != rule {
					t.Errorf("Rule = %q (%s); want %q", aerr.Rule, aerr.Message, rule)
				}
				if aerr.Message == "" || !strings.Contains(aerr.Error(), aerr.Message) {
					t.Errorf("Error() = %q does not carry the message %q", aerr.Error(), aerr.Message)
				}
				return
			}
			if aerr != nil {
				t.Fatalf("refused: %v; want a %s", aerr, kind)
			}
			if a.Kind != kind {
				t.Errorf("Kind = %q; want %q", a.Kind, kind)
			}
			want, ok := answerActions[name]
			if !ok {
				t.Fatalf("answerActions has no entry for %s", name)
			}
			if a.Action != want {
				t.Errorf("Action = %q; want %q", a.Action, want)
			}
			if a.Raw != text {
				t.Errorf("Raw = %q; want the input %q", a.Raw, text)
			}
			switch kind {
			case KindProposal:
				if a.Response != nil {
					t.Errorf("a proposal has a Response: %+v", a.Response)
				}
				if a.Reasoning == "" {
					t.Errorf("Reasoning is empty")
				}
				if !strings.HasPrefix(a.Key, strings.ToUpper(want)+" ") {
					t.Errorf("Key = %q; want it to start with %q", a.Key, strings.ToUpper(want)+" ")
				}
			case KindAgentResponse:
				if a.Response == nil {
					t.Fatal("an agent response without Response")
				}
				if a.Response.Action != want || a.Key != want {
					t.Errorf("Response.Action = %q, Key = %q; want both %q", a.Response.Action, a.Key, want)
				}
				if a.Response.SummaryForSupervisor == "" || a.Response.EvidenceFiles == nil {
					t.Errorf("Response = %+v; want the summary and the (maybe empty) evidence list", a.Response)
				}
			}
		})
	}
}

// TestParseAnswerTestdataCoverage keeps the testdata honest: each rule the
// brief names has at least one file, and every accepted answer has its
// expected action.
func TestParseAnswerTestdataCoverage(t *testing.T) {
	have := map[string]bool{}
	for _, path := range answerFiles(t) {
		name := filepath.Base(path)
		kind, rule, _ := answerExpectation(t, name)
		have[kind+rule] = true
		if kind != "" {
			if _, ok := answerActions[name]; !ok {
				t.Errorf("answerActions has no entry for %s", name)
			}
		}
	}
	for name := range answerActions {
		if _, err := os.Stat(filepath.Join(answersDir, name)); err != nil {
			t.Errorf("answerActions names %s: %v", name, err)
		}
	}
	for _, k := range []string{KindProposal, KindAgentResponse, "size", "json", "object", "schema"} {
		if !have[k] {
			t.Errorf("no testdata file for %s", k)
		}
	}
}

func TestParseAnswerSize(t *testing.T) {
	const resp = `{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"x"}`
	tests := []struct {
		name string
		text string
		max  int
		rule string
	}{
		{"at the limit", resp, len(resp), ""},
		{"one byte over", resp, len(resp) - 1, "size"},
		// The limit is on the answer as received, white space included.
		{"white space counts", "  " + resp + "\n", len(resp) + 2, "size"},
		{"white space within", "  " + resp + "\n", len(resp) + 3, ""},
		{"zero limit", resp, 0, "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, aerr := ParseAnswer(tt.text, tt.max)
			got := ""
			if aerr != nil {
				got = aerr.Rule
			}
			if got != tt.rule {
				t.Errorf("rule = %q (%v); want %q", got, aerr, tt.rule)
			}
		})
	}
}

func TestParseAnswerMessages(t *testing.T) {
	// The message goes back to the model: it must say what to change.
	tests := []struct {
		name, text, rule, says string
	}{
		{"fence", "```json\n{}\n```", "object", "markdown fences"},
		{"prose first", "Here: {}", "object", "must start with {"},
		{"text after", `{"a":1} ok`, "json", "text after the JSON object"},
		{"two objects", `{"a":1}{"a":2}`, "json", "text after the JSON object"},
		{"duplicate", `{"a":1,"a":2}`, "json", "appears twice"},
		{"empty", "", "json", "empty"},
		{"blank", " \n\t", "json", "empty"},
		{"schema", `{"action":"DONE","evidence_files":[],"summary_for_supervisor":"x"}`, "schema", "/action"},
		{"size", `{}`, "size", "at most 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := answerMax
			if tt.rule == "size" {
				max = 1
			}
			a, aerr := ParseAnswer(tt.text, max)
			if aerr == nil {
				t.Fatalf("accepted: %+v", a)
			}
			if aerr.Rule != tt.rule || !strings.Contains(aerr.Message, tt.says) {
				t.Errorf("got (%s) %q; want (%s) saying %q", aerr.Rule, aerr.Message, tt.rule, tt.says)
			}
		})
	}
}

// An answer is one JSON text: only JSON's white space (space, tab, line
// feed, carriage return) may surround its object. Other white space
// (no-break space, a line separator, a form feed) is text around it, and
// the answer is refused: before, strings.TrimSpace let it through.
func TestParseAnswerOnlyJSONWhitespace(t *testing.T) {
	const ok = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`
	if _, aerr := ParseAnswer(" \t\r\n"+ok+"\r\n \t", answerMax); aerr != nil {
		t.Fatalf("JSON white space refused: %v", aerr)
	}
	for _, ws := range []string{"\u00a0", "\u2028", "\u2029", "\u3000", "\u0085", "\v", "\f", "\u1680", "\u2003"} {
		for _, c := range []struct{ where, text, rule string }{
			{"before", ws + ok, "object"},
			{"after", ok + ws, "json"},
			{"both", ws + "\n" + ok + "\n" + ws, "object"},
		} {
			if a, aerr := ParseAnswer(c.text, answerMax); aerr == nil || aerr.Rule != c.rule {
				t.Errorf("%U %s the object: got %+v, %v; want refused (%s)", []rune(ws)[0], c.where, a, aerr, c.rule)
			}
		}
	}
}

func TestParseAnswerUTF8(t *testing.T) {
	const ok = `{"action":"COMPLETED","evidence_files":["/sandbox/café.md"],"summary_for_supervisor":"naïve résumé ✓"}`
	if _, aerr := ParseAnswer(ok, answerMax); aerr != nil {
		t.Fatalf("valid UTF-8 refused: %v", aerr)
	}
	tests := []struct{ name, text string }{
		{"in a response", strings.Replace(ok, "é", "\xe9", 1)},
		{"in a proposal", answerProposal("x", "\xff", "THINK", "{}")},
		{"in a member name", "{\"act\xc0ion\":\"COMPLETED\"}"},
		{"in args", answerProposal("x", "r", "READ_FILE", "{\"path\":\"/sandbox/\xed\xa0\x80\"}")}, // a surrogate half
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if utf8.ValidString(tt.text) {
				t.Fatal("the test's text is valid UTF-8")
			}
			a, aerr := ParseAnswer(tt.text, answerMax)
			if aerr == nil {
				t.Fatalf("invalid UTF-8 accepted: %+v", a)
			}
			if aerr.Rule != "json" {
				t.Errorf("Rule = %q (%s); want json", aerr.Rule, aerr.Message)
			}
		})
	}
}

// answerProposal is a proposal's text with the given parts.
func answerProposal(id, reasoning, action, args string) string {
	return `{"schema_version":"1.0.0","id":"` + id + `","reasoning":"` + reasoning + `","action":"` + action + `","args":` + args + `}`
}

func TestParseAnswerKey(t *testing.T) {
	const (
		id1 = "0b8f1a3e-6c2d-4f5a-9b7e-1d2c3b4a5f60"
		id2 = "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
	)
	base := answerProposal(id1, "read the notes", "READ_FILE", `{"path":"/sandbox/notes.md"}`)
	tests := []struct {
		name  string
		other string
		equal bool
	}{
		{"another id", answerProposal(id2, "read the notes", "READ_FILE", `{"path":"/sandbox/notes.md"}`), true},
		{"another reasoning", answerProposal(id1, "I must see them first", "READ_FILE", `{"path":"/sandbox/notes.md"}`), true},
		{"another id and reasoning", answerProposal(id2, "again", "READ_FILE", `{"path":"/sandbox/notes.md"}`), true},
		{"white space in args", answerProposal(id2, "read the notes", "READ_FILE", "{ \"path\" :\n\t\"/sandbox/notes.md\" }"), true},
		{"member order", `{"args":{"path":"/sandbox/notes.md"},"action":"READ_FILE","reasoning":"r","id":"` + id2 + `","schema_version":"1.0.0"}`, true},
		{"lower-case action", answerProposal(id2, "read the notes", "read_file", `{"path":"/sandbox/notes.md"}`), true},
		{"escaped path", answerProposal(id2, "read the notes", "READ_FILE", `{"path":"\/sandbox\/notes\u002emd"}`), true},
		{"another path", answerProposal(id1, "read the notes", "READ_FILE", `{"path":"/sandbox/other.md"}`), false},
		{"another action", answerProposal(id1, "read the notes", "LIST_FILES", `{"path":"/sandbox/notes.md"}`), false},
		{"another arg", answerProposal(id1, "read the notes", "READ_FILE", `{"path":"/sandbox/notes.md","x":1}`), false},
	}
	a, aerr := ParseAnswer(base, answerMax)
	if aerr != nil {
		t.Fatal(aerr)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, aerr := ParseAnswer(tt.other, answerMax)
			if aerr != nil {
				t.Fatal(aerr)
			}
			if got := a.Key == b.Key; got != tt.equal {
				t.Errorf("keys equal = %v; want %v:\n%s\n%s", got, tt.equal, a.Key, b.Key)
			}
		})
	}

	t.Run("writes differing in content", func(t *testing.T) {
		w1, _ := ParseAnswer(answerProposal(id1, "r", "WRITE_FILE", `{"path":"/sandbox/a.md","content":"one"}`), answerMax)
		w2, _ := ParseAnswer(answerProposal(id2, "r", "WRITE_FILE", `{"path":"/sandbox/a.md","content":"two"}`), answerMax)
		if w1 == nil || w2 == nil || w1.Key == w2.Key {
			t.Errorf("keys %v and %v; want two different keys", w1, w2)
		}
	})
	t.Run("agent responses", func(t *testing.T) {
		r1, _ := ParseAnswer(`{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"one"}`, answerMax)
		r2, _ := ParseAnswer(`{"action":"STUCK","evidence_files":["a.md"],"summary_for_supervisor":"two"}`, answerMax)
		if r1 == nil || r2 == nil || r1.Key != ActionStuck || r2.Key != ActionStuck {
			t.Errorf("keys of two STUCK responses: %v, %v; want both %q", r1, r2, ActionStuck)
		}
	})
}

// TestParseAnswerProposalIsLoose pins the documented split of work: an
// object with a schema_version is a proposal whatever the rest holds (the
// executor validates it and its refusal is an observation).
func TestParseAnswerProposalIsLoose(t *testing.T) {
	tests := []struct{ name, text, action string }{
		{"only a version", `{"schema_version":"1.0.0"}`, ""},
		{"unknown action", answerProposal("x", "r", "RUN_COMMAND", `{"cmd":"ls"}`), "RUN_COMMAND"},
		{"extra member", `{"schema_version":"1.0.0","action":"THINK","args":{},"extra":true}`, "THINK"},
		{"action not a string", `{"schema_version":"1.0.0","action":7}`, ""},
		{"version of another major", `{"schema_version":"2.0.0","action":"THINK","args":{}}`, "THINK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, aerr := ParseAnswer(tt.text, answerMax)
			if aerr != nil {
				t.Fatalf("refused: %v", aerr)
			}
			if a.Kind != KindProposal || a.Action != tt.action {
				t.Errorf("Kind, Action = %q, %q; want %q, %q", a.Kind, a.Action, KindProposal, tt.action)
			}
		})
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, path := range answerFiles(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), answerMax)
	}
	f.Add(`{"schema_version":"1.0.0","args":{"a":[1,2.50,1e3,"\u00e9"]}}`, 100)
	f.Add(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"s"}`, 10)
	f.Fuzz(func(t *testing.T, text string, max int) {
		a, aerr := ParseAnswer(text, max)
		if (a == nil) == (aerr == nil) {
			t.Fatalf("answer %+v and error %v: want exactly one", a, aerr)
		}
		if aerr != nil {
			if !slices.Contains(answerRules, aerr.Rule) || aerr.Message == "" {
				t.Fatalf("error %+v: want a known rule and a message", aerr)
			}
			return
		}
		if a.Raw != text {
			t.Fatalf("Raw = %q; want the input %q", a.Raw, text)
		}
		if len(text) > max {
			t.Fatalf("accepted %d bytes over a limit of %d", len(text), max)
		}
		if !utf8.ValidString(text) {
			t.Fatalf("accepted invalid UTF-8 %q", text)
		}
		trimmed := jsontext.Value(strings.TrimSpace(text))
		if !trimmed.IsValid() || trimmed.Kind() != '{' {
			t.Fatalf("accepted %q, which is not one JSON object", text)
		}
		var obj map[string]jsontext.Value
		if err := jsonv2.Unmarshal(trimmed, &obj); err != nil || obj == nil {
			t.Fatalf("accepted %q, which does not decode as an object: %v", text, err)
		}
		out, err := jsonv2.Marshal(obj)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if v := jsontext.Value(out); !v.IsValid() || v.Kind() != '{' {
			t.Fatalf("re-marshalled %s is not a JSON object", out)
		}
		switch a.Kind {
		case KindProposal:
			if _, ok := obj["schema_version"]; !ok {
				t.Fatalf("a proposal without schema_version: %q", text)
			}
			if a.Response != nil {
				t.Fatalf("a proposal with a Response")
			}
			if !strings.HasPrefix(a.Key, strings.ToUpper(a.Action)+" ") {
				t.Fatalf("Key %q does not start with the action %q", a.Key, a.Action)
			}
		case KindAgentResponse:
			if _, ok := obj["schema_version"]; ok {
				t.Fatalf("an agent response with schema_version: %q", text)
			}
			if a.Response == nil || a.Response.Action != a.Action || a.Key != a.Action {
				t.Fatalf("agent response %+v / %+v inconsistent", a, a.Response)
			}
			if a.Action != ActionCompleted && a.Action != ActionStuck && a.Action != ActionRetry {
				t.Fatalf("agent response with action %q", a.Action)
			}
		default:
			t.Fatalf("Kind = %q", a.Kind)
		}
	})
}

// TestParseAnswerSchemaMessage: the schema error goes back to the model,
// which must be able to read what to change.
func TestParseAnswerSchemaMessage(t *testing.T) {
	tests := []struct{ name, text, says string }{
		{"extra member", `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"x","confidence":0.9}`, "confidence"},
		{"bad action", `{"action":"completed","evidence_files":[],"summary_for_supervisor":"x"}`, "COMPLETED"},
		{"missing member", `{"action":"COMPLETED","evidence_files":[]}`, "summary_for_supervisor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, aerr := ParseAnswer(tt.text, answerMax)
			if aerr == nil || aerr.Rule != "schema" {
				t.Fatalf("got %v; want a schema error", aerr)
			}
			if !strings.Contains(aerr.Message, tt.says) {
				t.Errorf("message %q does not name %q", aerr.Message, tt.says)
			}
			if strings.Contains(aerr.Message, "&{") {
				t.Errorf("message %q is a Go struct dump, not words the model can act on", aerr.Message)
			}
		})
	}
}

// A model's content may open with one <think> block, JSON's white space
// around it: the answer is what follows, judged as strictly as ever, and
// the prompt shows the model that alone; anything else around the object
// is refused, and a block that never closes is refused as such.
func TestParseModelAnswerThinkBlock(t *testing.T) {
	const obj = `{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"no"}`
	for _, c := range []struct {
		text, rule, shown string
	}{
		{obj, "", obj},
		{"<think>a</think>" + obj, "", obj},
		{" \n<think>\na\n</think>\r\n\t" + obj + "\n", "", obj},
		{"<think></think>" + obj, "", obj},
		{"<think>a</think>", "json", ""},
		{"<think>a", "reasoning", ""},
		{"<think>a{" + obj, "reasoning", ""},
		{"x<think>a</think>" + obj, "object", "x<think>a</think>" + obj},
		{"<think>a</think>x" + obj, "object", "x" + obj},
		{"<think>a</think><think>b</think>" + obj, "object", "<think>b</think>" + obj},
		{"<think>a</think>" + obj + "<think>b</think>", "json", obj + "<think>b</think>"},
		{"<think>a</think>\u00a0" + obj, "object", "\u00a0" + obj},
		{"\u00a0<think>a</think>" + obj, "object", "\u00a0<think>a</think>" + obj},
		{"<Think>a</Think>" + obj, "object", "<Think>a</Think>" + obj},
		{"a</think>" + obj, "object", "a</think>" + obj},
	} {
		a, aerr := parseModelAnswer(c.text, 1<<10)
		switch {
		case c.rule == "" && aerr != nil:
			t.Errorf("%q: refused (%v)", c.text, aerr)
		case c.rule == "" && (a.Object != obj || a.Raw != c.text || a.Kind != KindAgentResponse):
			t.Errorf("%q: object %q, raw %q, kind %s", c.text, a.Object, a.Raw, a.Kind)
		case c.rule != "" && (aerr == nil || aerr.Rule != c.rule):
			t.Errorf("%q: %v; want refused, rule %s", c.text, aerr, c.rule)
		}
		if got := answerText(c.text); got != c.shown {
			t.Errorf("answerText(%q) = %q; want %q", c.text, got, c.shown)
		}
	}
	if _, aerr := parseModelAnswer("a</think>"+obj, 1<<10); aerr == nil || !strings.Contains(aerr.Message, "without the <think>") {
		t.Errorf("a </think> without its <think>: %v; want the refusal to say so", aerr)
	}
	// The size bound is the whole content's.
	if _, aerr := parseModelAnswer("<think>"+strings.Repeat("a", 100)+"</think>"+obj, 100); aerr == nil || aerr.Rule != "size" {
		t.Errorf("a content over the bound with its reasoning: %v; want refused for its size", aerr)
	}
}
