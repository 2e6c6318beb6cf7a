package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/snapnode/snapnode/schemas"
)

// Answer is a model's answer, parsed: a proposal for the executor, or an
// agent response that ends the phase.
type Answer struct {
	// Kind is KindProposal or KindAgentResponse.
	Kind string
	// Raw is the answer exactly as received.
	Raw string
	// Object is the answer's JSON object alone: Raw without the white
	// space around it (trimAnswer), and without the <think> block a
	// model's content may open with (parseModelAnswer), what the
	// executor is given.
	Object string
	// Action is the proposal's action as spelled (READ_FILE), or the agent
	// response's (COMPLETED, STUCK, RETRY).
	Action string
	// Key identifies what the answer asks for, independent of its id and
	// reasoning: the same action with the same arguments has the same key.
	Key string
	// Reasoning is the proposal's, ID its id.
	Reasoning string
	ID        string
	// Response is the agent response's content.
	Response *AgentResponse
}

// AgentResponse is an agent response (schemas/agent-response.v1.json).
type AgentResponse struct {
	Action               string   `json:"action"`
	EvidenceFiles        []string `json:"evidence_files"`
	SummaryForSupervisor string   `json:"summary_for_supervisor"`
}

// The actions of an agent response.
const (
	ActionCompleted = "COMPLETED"
	ActionStuck     = "STUCK"
	ActionRetry     = "RETRY"
)

// AnswerError is why an answer was refused: fed back to the model so that
// it can answer again.
type AnswerError struct {
	// Rule is the broken rule: size, json, object, kind, schema,
	// tool_call (the answer called a tool instead), or reasoning (a
	// thinking model sent its reasoning and no answer).
	Rule    string
	Message string
}

func (e *AnswerError) Error() string { return "invalid answer (" + e.Rule + "): " + e.Message }

// ParseAnswer reads a model's answer strictly: exactly one JSON object of
// at most max bytes, no text or markdown around it (JSON's white space
// aside: space, tab, line feed, carriage return; any other is text), no
// duplicate member names, valid UTF-8. An object with a schema_version is
// a proposal (the executor validates the rest and its refusals are
// observations); any other must be a valid agent response.
func ParseAnswer(text string, max int) (*Answer, *AnswerError) {
	if len(text) > max {
		return nil, &AnswerError{Rule: "size", Message: fmt.Sprintf("the answer is %d bytes, at most %d are accepted", len(text), max)}
	}
	trimmed := trimAnswer(text)
	if trimmed == "" {
		return nil, &AnswerError{Rule: "json", Message: "the answer is empty; send exactly one JSON object"}
	}
	if trimmed[0] != '{' {
		hint := "it must start with {"
		if strings.HasPrefix(trimmed, "```") {
			hint = "send the JSON object alone, without markdown fences"
		}
		return nil, &AnswerError{Rule: "object", Message: "the answer is not a single JSON object: " + hint}
	}
	var obj map[string]jsontext.Value
	if err := json.Unmarshal([]byte(trimmed), &obj); err != nil {
		msg := "the answer is not exactly one well-formed JSON object"
		var syn *jsontext.SyntacticError
		switch {
		case errors.Is(err, jsontext.ErrDuplicateName):
			msg = "a member name appears twice; every name must appear once"
		case errors.As(err, &syn) && strings.Contains(syn.Error(), "after top-level value"):
			msg = "there is text after the JSON object; send one object and nothing else"
		case errors.As(err, &syn):
			msg += " (" + syn.Err.Error() + " at byte " + fmt.Sprint(syn.ByteOffset) + ")"
		}
		return nil, &AnswerError{Rule: "json", Message: msg}
	}
	a := &Answer{Raw: text, Object: trimmed}
	if _, ok := obj["schema_version"]; ok {
		a.Kind = KindProposal
		var head struct {
			ID        string         `json:"id"`
			Action    string         `json:"action"`
			Reasoning string         `json:"reasoning"`
			Args      jsontext.Value `json:"args"`
		}
		// Loosely: the executor is the judge of the proposal; the agent
		// only needs its action and arguments.
		_ = json.Unmarshal([]byte(trimmed), &head, json.RejectUnknownMembers(false))
		a.Action, a.Reasoning, a.ID = head.Action, head.Reasoning, head.ID
		args := head.Args
		if len(args) > 0 {
			args = args.Clone()
			_ = args.Canonicalize()
		}
		a.Key = strings.ToUpper(head.Action) + " " + string(args)
		return a, nil
	}
	var v any
	_ = json.Unmarshal([]byte(trimmed), &v)
	if err := schemas.AgentResponse().Validate(v); err != nil {
		return nil, &AnswerError{Rule: "schema", Message: "neither a proposal (it has no schema_version) nor a valid agent response: " + schemaMessage(err)}
	}
	var r AgentResponse
	if err := json.Unmarshal([]byte(trimmed), &r); err != nil {
		return nil, &AnswerError{Rule: "schema", Message: err.Error()}
	}
	a.Kind, a.Action, a.Response, a.Key = KindAgentResponse, r.Action, &r, r.Action
	return a, nil
}

// The tags of the block in which a thinking model's content may give its
// reasoning before its answer, as DeepSeek-R1, Qwen3 and QwQ write it
// when the server does not separate it (llama-server with
// --reasoning-format none, vLLM without a reasoning parser, older
// servers and chat templates).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// parseModelAnswer is ParseAnswer for a model's content: one <think>
// block at its very start (JSON's white space around it aside) is the
// model's reasoning, set apart (the Answer's Raw alone keeps it; the
// step's history has it as Response.Reasoning); what follows it is
// judged by ParseAnswer, as strictly as an answer without one. The
// size bound is the whole content's. A <think> block that never closes
// is refused (rule reasoning). An external worker's line is not a
// model's content: it goes through ParseAnswer alone.
func parseModelAnswer(text string, max int) (*Answer, *AnswerError) {
	if len(text) > max {
		return ParseAnswer(text, max)
	}
	_, rest, ok, closed := splitThought(text)
	if !ok {
		a, aerr := ParseAnswer(text, max)
		if aerr != nil && aerr.Rule == "object" && strings.Contains(text, thinkClose) {
			// A chat template that opens the block in the prompt
			// leaves the model's text with its end alone.
			aerr.Message = "the answer is not a single JSON object: it has a " + thinkClose + " without the " + thinkOpen +
				" that opens it; the reasoning, if any, must be one " + thinkOpen + "…" + thinkClose + " block at the very start"
		}
		return a, aerr
	}
	if !closed {
		return nil, &AnswerError{Rule: "reasoning", Message: "the answer opens a " + thinkOpen + " block it never closes; end the reasoning with " + thinkClose + " and send the JSON object after it"}
	}
	a, aerr := ParseAnswer(rest, max)
	if aerr != nil {
		return nil, aerr
	}
	a.Raw = text
	return a, nil
}

// splitThought separates the <think> block text opens with (after JSON's
// white space) from the rest: ok reports a block, closed that it ends;
// thought is its text, trimmed, rest what follows its end. A block that
// does not close has all the text after its opening tag as thought.
func splitThought(text string) (thought, rest string, ok, closed bool) {
	after, ok := strings.CutPrefix(strings.TrimLeft(text, jsonSpace), thinkOpen)
	if !ok {
		return "", text, false, false
	}
	thought, rest, closed = strings.Cut(after, thinkClose)
	return strings.TrimSpace(thought), rest, true, closed
}

// answerText is a model's stored answer without the <think> block it may
// open with (all of it when the block never closes) and the white space
// after the block: what the model is shown of its earlier answers, and
// what stands for the executor's data of an answer redacted past parsing.
// The reasoning is never sent back.
func answerText(raw string) string {
	if _, rest, ok, closed := splitThought(raw); ok {
		if !closed {
			return ""
		}
		return trimAnswer(rest)
	}
	return raw
}

// trimAnswer is text without the white space an answer may have around
// its object: JSON's (RFC 8259: space, tab, line feed, carriage return),
// and no other. An answer is one JSON text whose value is an object; a
// no-break space, a line separator, a form feed or any other Unicode
// space around it is text, and the answer is refused. It is the one rule
// of the live run (ParseAnswer, a worker's line) and of what reads a
// stored answer again (Replay, a step finished after a restart).
func trimAnswer(text string) string { return strings.Trim(text, jsonSpace) }

// jsonSpace is JSON's white space (RFC 8259).
const jsonSpace = " \t\n\r"

// schemaMessage says where and why a JSON Schema validation failed, in
// one line.
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := "/" + strings.Join(ve.InstanceLocation, "/")
	return fmt.Sprintf("at %s: %s", loc, ve.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
}
