package worker

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/schemas"
)

// LineError is why a worker's line was refused: the rule it breaks and
// how. A refused line is a protocol violation: the worker is stopped.
type LineError struct {
	// Rule is the broken rule: size, utf8, json, object, schema.
	Rule    string
	Message string
}

func (e *LineError) Error() string { return "invalid worker line (" + e.Rule + "): " + e.Message }

// ParseLine reads one line a worker wrote (without its newline): exactly
// one JSON object of at most max bytes, valid UTF-8, no duplicate member
// names, valid against schemas/worker-answer.v1.json (a proposal envelope,
// which the executor judges in full, or an agent response).
func ParseLine(line []byte, max int) (*agent.Answer, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > max {
		return nil, &LineError{Rule: "size", Message: fmt.Sprintf("the line is %d bytes, at most %d are accepted", len(line), max)}
	}
	if !utf8.Valid(line) {
		return nil, &LineError{Rule: "utf8", Message: "the line is not valid UTF-8"}
	}
	ans, aerr := agent.ParseAnswer(string(line), max)
	if aerr != nil {
		return nil, &LineError{Rule: aerr.Rule, Message: aerr.Message}
	}
	var v any
	if err := json.Unmarshal([]byte(ans.Object), &v); err != nil {
		return nil, &LineError{Rule: "json", Message: err.Error()}
	}
	if err := schemas.WorkerAnswer().Validate(v); err != nil {
		return nil, &LineError{Rule: "schema", Message: "neither a proposal (with schema_version and action) nor an agent response: " + oneLine(err.Error(), 300)}
	}
	if ans.Kind == agent.KindProposal && ans.Action == "" {
		return nil, &LineError{Rule: "schema", Message: "at /action: a proposal's action is a non-empty string"}
	}
	return ans, nil
}

// lastLine is oneLine keeping the end of s instead of its start: what
// names a failure is the last line a program wrote (a traceback's
// exception).
func lastLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = "…" + strings.ToValidUTF8(s[len(s)-max:], "")
	}
	return s
}

// oneLine is s on one line, cut to max bytes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
