package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
)

func TestObserve(t *testing.T) {
	readOut := func(content string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"status": "success", "action": "READ_FILE", "result": map[string]any{"content": content}})
		return b
	}
	tests := []struct {
		name    string
		res     *executor.Result
		outcome string
		has     []string // members of the text fed back
		hasNot  []string
	}{
		{"completed", &executor.Result{Outcome: executor.Completed, ActionID: "a1", Action: "READ_FILE", Output: readOut("alpha")},
			ObsCompleted, []string{"outcome", "action", "output"}, []string{"reason", "note", "diff"}},
		{"failed", &executor.Result{Outcome: executor.Failed, ActionID: "a2", Action: "WRITE_FILE", Reason: "PATH_NOT_ALLOWED",
			Output: json.RawMessage(`{"status":"error","code":"PATH_NOT_ALLOWED"}`)},
			ObsFailed, []string{"outcome", "action", "reason", "output"}, []string{"note"}},
		{"needs confirmation", &executor.Result{Outcome: executor.NeedsConfirmation, ActionID: "a3", Action: "DELETE_FILE",
			Reason: "policy: deletes need an operator", Diff: "-gone\n"},
			ObsNeedsConfirmation, []string{"outcome", "action", "note", "diff"}, []string{"output", "reason"}},
		{"diff too long", &executor.Result{Outcome: executor.Completed, ActionID: "a4", Action: "WRITE_FILE",
			Diff: strings.Repeat("+x\n", 100)},
			ObsCompleted, []string{"outcome", "action"}, []string{"diff", "output"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := observe(tt.res, 128)
			if o.Outcome != tt.outcome || o.ActionID != tt.res.ActionID || o.Reason != tt.res.Reason || o.Diff != tt.res.Diff {
				t.Errorf("observation %+v", o)
			}
			var fb map[string]any
			if err := json.Unmarshal([]byte(o.Text), &fb); err != nil {
				t.Fatalf("Text %q is not a JSON object: %v", o.Text, err)
			}
			if fb["outcome"] != tt.outcome || fb["action"] != tt.res.Action {
				t.Errorf("Text %s", o.Text)
			}
			for _, k := range tt.has {
				if _, ok := fb[k]; !ok {
					t.Errorf("Text %s lacks %q", o.Text, k)
				}
			}
			for _, k := range tt.hasNot {
				if _, ok := fb[k]; ok {
					t.Errorf("Text %s has %q", o.Text, k)
				}
			}
		})
	}
}

func TestBoundOutput(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	read, _ := json.Marshal(map[string]any{"status": "success", "action": "READ_FILE", "result": map[string]any{"content": long}})
	t.Run("within", func(t *testing.T) {
		if got := boundOutput(read, len(read)); string(got) != string(read) {
			t.Errorf("output within the bound changed: %s", got)
		}
	})
	t.Run("content cut", func(t *testing.T) {
		got := boundOutput(read, 51)
		var o struct {
			Status, Action string
			Result         struct {
				Content   string
				Truncated bool
				Size      int
				SHA256    string
				Note      string
			}
		}
		if err := json.Unmarshal(got, &o); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		sum := sha256.Sum256([]byte(long))
		if o.Status != "success" || o.Action != "READ_FILE" || !o.Result.Truncated || o.Result.Size != 200 ||
			o.Result.SHA256 != hex.EncodeToString(sum[:]) || !strings.Contains(o.Result.Note, "first 48 bytes of 200") {
			t.Errorf("bounded output %s", got)
		}
		// 51 bytes with the mark: the 24 whole characters that fit.
		if want := strings.Repeat("é", 24) + "…"; o.Result.Content != want {
			t.Errorf("content %q; want %q (cut on a rune boundary, the mark within the bound)", o.Result.Content, want)
		}
	})
	t.Run("not a read", func(t *testing.T) {
		out := json.RawMessage(`{"status":"success","action":"LIST_FILES","result":{"entries":["` + strings.Repeat("a", 300) + `"]}}`)
		got := boundOutput(out, 64)
		var o struct {
			Truncated bool
			Size      int
			Head      string
		}
		if err := json.Unmarshal(got, &o); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if !o.Truncated || o.Size != len(out) || !strings.HasPrefix(string(out), strings.TrimSuffix(o.Head, "…")) {
			t.Errorf("bounded output %s", got)
		}
	})
}

// TestObserveEscapesInvisible: what a listing or a file holds reaches the
// model, and the job's history, as JSON whose format characters (bidi
// overrides and isolates, zero-width ones, tags) and line and paragraph
// separators are \u escapes: no raw U+202E can reorder the prompt's text
// or what an operator reads, and the JSON means the same strings. Before,
// they were written as they were.
func TestObserveEscapesInvisible(t *testing.T) {
	hostile := "rtl\u202egnp.md \u2066iso\u2069 zw\u200bj\u200d \ufeffbom \u00adshy line\u2028para\u2029 tag\U000E0041"
	list, _ := json.Marshal(map[string]any{"status": "success", "action": "LIST_FILES", "result": map[string]any{
		"entries": []map[string]any{{"name": hostile, "path": "/sandbox/" + hostile, "kind": "file", "size": 2, "invalid": "format_char"}}}})
	read, _ := json.Marshal(map[string]any{"status": "success", "action": "READ_FILE", "result": map[string]any{"content": "say\n" + hostile + "\n"}})
	for _, res := range []*executor.Result{
		{Outcome: executor.Completed, ActionID: "l1", Action: "LIST_FILES", Output: list},
		{Outcome: executor.Completed, ActionID: "r1", Action: "READ_FILE", Output: read},
		{Outcome: executor.NeedsConfirmation, ActionID: "w1", Action: "WRITE_FILE", Reason: "policy", Diff: "+" + hostile + "\n"},
	} {
		t.Run(res.Action, func(t *testing.T) {
			o := observe(res, 4096)
			for _, r := range []rune{'\u202e', '\u2066', '\u2069', '\u200b', '\u200d', '\ufeff', '\u00ad', '\u2028', '\u2029', '\U000E0041'} {
				if strings.ContainsRune(o.Text, r) || strings.ContainsRune(string(o.Output), r) {
					t.Errorf("the observation holds a raw %U:\ntext %s\noutput %s", r, o.Text, o.Output)
				}
			}
			if !strings.Contains(o.Text, `\u202e`) || !strings.Contains(o.Text, `\udb40\udc41`) {
				t.Errorf("Text %s lacks the escapes", o.Text)
			}
			var fb map[string]any
			if err := json.Unmarshal([]byte(o.Text), &fb); err != nil {
				t.Fatalf("Text %q is not JSON: %v", o.Text, err)
			}
			if res.Diff != "" {
				if fb["diff"] != res.Diff {
					t.Errorf("diff decodes to %q, want %q", fb["diff"], res.Diff)
				}
				return
			}
			var want, got, gotText any
			if err := json.Unmarshal(res.Output, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(o.Output, &got); err != nil {
				t.Fatalf("Output %q is not JSON: %v", o.Output, err)
			}
			gotText = fb["output"]
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotText, want) {
				t.Errorf("the output decodes to\n%#v (Output)\n%#v (Text)\nwant %#v", got, gotText, want)
			}
		})
	}
}
