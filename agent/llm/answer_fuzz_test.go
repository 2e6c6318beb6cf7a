package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzReadAnswer feeds arbitrary bytes, as a model server's success body,
// to checkBody and readAnswer. Neither may panic; what checkBody lets by
// is one valid JSON value (jsontext's reading: valid UTF-8, no duplicate
// names); a refusal is ErrMalformedResponse; the answer taken holds at
// most maxToolCalls names of valid UTF-8 within maxToolNameSize, and
// written again as a chat.completion it reads back the same.
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		`{"model":"m1","choices":[{"message":{"role":"assistant","content":"A"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`,
		`{"choices":[{"index":1,"message":{"content":"B"}},{"index":0.0,"message":{"content":"A"}}],"usage":{"prompt_tokens":12.5,"completion_tokens":1e30}}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"run"}}],"function_call":{"name":"x"}}}]}`,
		`{"choices":[{"message":{"content":"A","Content":"B"}}]}`,
		`{"choices":[]}`, `{"choices":[{"message":{"content":[1]}}]}`, `{"model":7,"choices":[{}]}`,
		`{"usage":{"prompt_tokens":"9","completion_tokens":-1}}`, "\xff", `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := checkBody("application/json", body); err != nil {
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("checkBody: %v: not ErrMalformedResponse", err)
			}
			return
		}
		if !jsontext.Value(bytes.TrimSpace(body)).IsValid() {
			t.Fatalf("checkBody let by what jsontext refuses: %q", body)
		}
		a, err := readAnswer(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("readAnswer: %v: not ErrMalformedResponse", err)
			}
			return
		}
		if len(a.toolCalls) > maxToolCalls {
			t.Fatalf("%d tool calls kept", len(a.toolCalls))
		}
		for _, name := range a.toolCalls {
			if len(name) > maxToolNameSize || !utf8.ValidString(name) {
				t.Fatalf("tool call name %q kept", name)
			}
		}
		again, err := readAnswer(fzWrite(t, a))
		if err != nil {
			t.Fatalf("the answer written again is refused: %v", err)
		}
		again.choices = a.choices
		if !reflect.DeepEqual(again, a) {
			t.Fatalf("the answer written again reads otherwise:\n%+v\n%+v", a, again)
		}
	})
}

// fzWrite writes a as a chat.completion of one choice.
func fzWrite(t *testing.T, a *answer) []byte {
	type fn struct {
		Name string `json:"name"`
	}
	type call struct {
		Function fn `json:"function"`
	}
	msg := map[string]any{"content": a.text}
	if a.text == "" {
		msg["content"] = nil
	}
	var calls []call
	for _, name := range a.toolCalls {
		calls = append(calls, call{fn{name}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	doc := map[string]any{
		"choices": []any{map[string]any{"message": msg, "finish_reason": a.finish}},
		"usage":   map[string]int{"prompt_tokens": a.promptTokens, "completion_tokens": a.completionTokens},
	}
	if a.model != "" {
		doc["model"] = a.model
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
