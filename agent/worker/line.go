package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/schemas"
)

// LineError is why a worker's line was refused: the rule it breaks and
// how. A refused line is a protocol violation: the worker is stopped.
type LineError struct {
	// Rule is the broken rule: size, utf8, json, object, schema, step.
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

// AnswerStep takes the step member off a line a worker wrote: the line
// without it (what the node judges and records as the answer), the step
// it names, and whether it names one. The step of an answer is the step
// of the line it answers (the job request's or the observation's step).
// A line that is not one well-formed JSON object, or that names no step,
// is returned as it is, for ParseLine to judge. A step that is not an
// integer from 0 (written as one: 1.0 and 1e0 are refused), or a step
// named twice, is a LineError of rule step.
func AnswerStep(line []byte) (rest []byte, step int, named bool, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return line, 0, false, nil
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	_ = enc.WriteToken(jsontext.BeginObject)
	var stepValue jsontext.Value
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			// A step named twice is refused here, naming it; another
			// name twice is ParseLine's to refuse (json).
			var se *jsontext.SyntacticError
			if errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &se) && se.JSONPointer == "/step" {
				return nil, 0, false, &LineError{Rule: "step", Message: "at /step: the step is named twice; name it once, the step of the line it answers"}
			}
			return line, 0, false, nil
		}
		name := tok.String() // the token is void after the next read
		v, err := dec.ReadValue()
		if err != nil {
			return line, 0, false, nil
		}
		if name == "step" {
			stepValue = v.Clone()
			continue
		}
		if enc.WriteToken(jsontext.String(name)) != nil || enc.WriteValue(v) != nil {
			return line, 0, false, nil
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return line, 0, false, nil
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return line, 0, false, nil // text after the object: ParseLine names it
	}
	if stepValue == nil {
		return line, 0, false, nil
	}
	n, perr := strconv.Atoi(string(stepValue))
	if stepValue.Kind() != '0' || perr != nil || n < 0 {
		return nil, 0, false, &LineError{Rule: "step", Message: "at /step: want the step of the line it answers, an integer from 0; got " + oneLine(string(stepValue), 40)}
	}
	_ = enc.WriteToken(jsontext.EndObject)
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), n, true, nil
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
