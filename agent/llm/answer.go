package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The client reads a chat.completion itself, not through go-openai: its
// decoding fails a whole answer on a token count of 12.5 or 1e30, which
// left the cost of a call the server answered uncounted, and it drops the
// index of a choice.

// chatAnswer is the part of a chat.completion object the client reads.
type chatAnswer struct {
	Model   json.RawMessage `json:"model"`
	Choices few[chatChoice] `json:"choices"`
	// Error is the error object a proxy or server may send with a
	// success status in place of the choices.
	Error json.RawMessage `json:"error"`
	Usage *struct {
		PromptTokens     json.RawMessage `json:"prompt_tokens"`
		CompletionTokens json.RawMessage `json:"completion_tokens"`
	} `json:"usage"`
}

type chatChoice struct {
	Index   json.RawMessage `json:"index"`
	Message struct {
		Content json.RawMessage `json:"content"`
		// A thinking model's trace, which the server sent apart from
		// the content: llama-server's and vLLM's reasoning_content,
		// Ollama's (and newer vLLM's) reasoning.
		ReasoningContent json.RawMessage `json:"reasoning_content"`
		Reasoning        json.RawMessage `json:"reasoning"`
		ToolCalls        few[struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}] `json:"tool_calls"`
		FunctionCall *struct {
			Name string `json:"name"`
		} `json:"function_call"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// Bounds of the tool calls an answer names.
const (
	maxToolCalls    = 8
	maxToolNameSize = 100
)

// maxDecoded is how many elements of an answer's array (choices, tool
// calls) the client decodes; the rest are counted.
const maxDecoded = 8

// few is a JSON array of which only the first maxDecoded elements are
// decoded, the others counted: a server's array of many small elements
// ("[{},{},…]") would otherwise take a hundred times its bytes in
// memory, where the client asks for one choice and names 8 tool calls.
// An element that does not decode is kept as err, the array's others
// and the answer's usage read all the same.
type few[T any] struct {
	items []T
	n     int // how many the array held
	err   error
}

func (f *few[T]) UnmarshalJSON(b []byte) error {
	*f = few[T]{}
	d := jsontext.NewDecoder(bytes.NewReader(b))
	tok, err := d.ReadToken()
	switch {
	case err != nil:
		f.err = err
		return nil
	case tok.Kind() == 'n':
		return nil
	case tok.Kind() != '[':
		f.err = fmt.Errorf("want an array, got %s", tok.Kind())
		return nil
	}
	for d.PeekKind() != ']' {
		v, err := d.ReadValue()
		if err != nil {
			f.err = err
			return nil
		}
		if f.n++; len(f.items) < maxDecoded {
			var x T
			if err := json.Unmarshal(v, &x); err != nil && f.err == nil {
				f.err = err
			}
			f.items = append(f.items, x)
		}
	}
	return nil
}

// answer is what the client takes of a chat.completion.
type answer struct {
	text, model, finish string
	// reasoning is the message's reasoning, whole; reasoningBytes its
	// length (see reasoning).
	reasoning        string
	reasoningBytes   int
	toolCalls        []string
	promptTokens     int
	completionTokens int
	choices          int // how many the server sent
	// serverError is the message of the error object an answer without
	// choices held, whole: the client redacts the key in it, then cuts
	// it to maxMessage (a key across the cut would leave its first part).
	serverError string
}

// readAnswer reads a chat.completion body (one JSON value, checked by
// checkBody). Its choice is the one of index 0: the request asks for one
// (n=1), and a server that sends several anyway has the one of index 0
// taken, by its index rather than its place in the array; none or several
// of index 0 among several, or more than maxDecoded choices, is no
// answer. One choice is the answer
// whatever its index. An answer refused once its usage was read is
// returned with the error, holding that usage.
func readAnswer(body []byte) (*answer, error) {
	var b chatAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedResponse, err)
	}
	a := &answer{choices: b.Choices.n}
	if b.Usage != nil {
		a.promptTokens, a.completionTokens = tokenCount(b.Usage.PromptTokens), tokenCount(b.Usage.CompletionTokens)
	}
	_ = json.Unmarshal(b.Model, &a.model) // a model that is not a string is left unnamed
	if b.Choices.err != nil {
		return a, fmt.Errorf("%w: the choices: %w", ErrMalformedResponse, b.Choices.err)
	}
	var ch *chatChoice
	switch b.Choices.n {
	case 0:
		if len(b.Error) > 0 && string(b.Error) != "null" {
			// {"error":{"message":…}}, {"error":"…"}: the server's
			// reason, for the operator, in place of its absent answer.
			a.serverError = strings.TrimSpace(bodyMessage(body))
		}
		return a, fmt.Errorf("%w: the server's answer has no choices", ErrMalformedResponse)
	case 1:
		ch = &b.Choices.items[0]
	default:
		if b.Choices.n > maxDecoded {
			return a, fmt.Errorf("%w: the server sent %d choices though one was asked for (n=1)", ErrMalformedResponse, b.Choices.n)
		}
		n := 0
		for i := range b.Choices.items {
			if indexZero(b.Choices.items[i].Index) {
				ch, n = &b.Choices.items[i], n+1
			}
		}
		if n != 1 {
			which := "none"
			if n > 1 {
				which = strconv.Itoa(n)
			}
			return a, fmt.Errorf("%w: the server sent %d choices though one was asked for (n=1), %s of index 0", ErrMalformedResponse, b.Choices.n, which)
		}
	}
	switch c := strings.TrimSpace(string(ch.Message.Content)); {
	case c == "" || c == "null":
	case c[0] == '"':
		if err := json.Unmarshal(ch.Message.Content, &a.text); err != nil {
			return a, fmt.Errorf("%w: the message's content: %w", ErrMalformedResponse, err)
		}
	default:
		return a, fmt.Errorf("%w: the message's content is not a string", ErrMalformedResponse)
	}
	a.reasoning, a.reasoningBytes = reasoning(ch.Message.ReasoningContent, ch.Message.Reasoning)
	if err := ch.Message.ToolCalls.err; err != nil {
		return a, fmt.Errorf("%w: the message's tool calls: %w", ErrMalformedResponse, err)
	}
	for _, tc := range ch.Message.ToolCalls.items {
		a.toolCalls = append(a.toolCalls, tc.Function.Name)
	}
	if fc := ch.Message.FunctionCall; fc != nil {
		a.toolCalls = append(a.toolCalls, fc.Name)
	}
	if len(a.toolCalls) > maxToolCalls {
		a.toolCalls = a.toolCalls[:maxToolCalls]
	}
	for i, name := range a.toolCalls {
		a.toolCalls[i] = cut(strings.ToValidUTF8(name, "\uFFFD"), maxToolNameSize)
	}
	a.finish = ch.FinishReason
	return a, nil
}

// reasoning is the first of raws that is a non-empty string, whole (the
// body's cap bounds it), and the length in bytes of the longest of raws
// that is a string: a thinking model's trace, which explains the answer
// and is never taken as it. The runtime redacts the trace before it cuts
// it to agent.MaxReasoningBytes: cut here first, a secret the cut split
// (a private key's END line past it) would no longer match and be kept.
// What is not a string (null, an object) is no trace, and does not
// refuse the answer. Two strings are measured once, the longer: vLLM may
// send the same trace in both fields, and a server that sends two that
// differ has its model's longer one priced.
func reasoning(raws ...json.RawMessage) (text string, n int) {
	for _, raw := range raws {
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			continue
		}
		n = max(n, len(s))
		if text == "" && strings.TrimSpace(s) != "" {
			text = strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	return text, n
}

// indexZero reports whether a choice's index is 0 (or absent, as some
// servers leave it).
func indexZero(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == 0
}

// tokenCount reads a usage count leniently: a fraction is rounded up, a
// count past an int's range is the largest (or least) int, and what is
// not a number (null, a string) is 0, for none. A count the server gave
// is never lost to how it wrote it, and none is made smaller.
func tokenCount(raw json.RawMessage) int {
	s := strings.TrimSpace(string(raw))
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return 0
	}
	if n, err := strconv.ParseInt(s, 10, 0); err == nil {
		return int(n)
	}
	f, err := strconv.ParseFloat(s, 64) // ±Inf past float64's range
	if err != nil && f == 0 {
		return 0
	}
	switch f = math.Ceil(f); {
	case f >= math.MaxInt:
		return math.MaxInt
	case f <= math.MinInt:
		return math.MinInt
	}
	return int(f)
}
