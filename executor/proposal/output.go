package proposal

// Output is the runtime output for an action that ran:
// {"status":"success","action":…,"result":{…}}, members in that order.
// A failure is reported by an *Error instead, whose JSON is the structured
// error.
type Output struct {
	Status string `json:"status"`
	Action string `json:"action"`
	Result any    `json:"result"`
}

// StatusSuccess is Output.Status for an action that ran.
const StatusSuccess = "success"

// Success builds the output of a proposal that ran, with the action as the
// proposer spelled it. A nil result is written as {}.
func Success(p *Proposal, result any) *Output {
	if result == nil {
		result = struct{}{}
	}
	return &Output{Status: StatusSuccess, Action: p.Action.Spelling, Result: result}
}

// ReadFileResult is the result of READ_FILE: the file's content, as in the
// proposal schema versioning strategy's example of a compatible version.
// Content must be valid UTF-8 to be written as JSON; what to do with a
// binary file is the executor's decision.
type ReadFileResult struct {
	Content string `json:"content"`
}

// ReadFileSuccess builds the output of a READ_FILE proposal from the content
// the executor read.
func ReadFileSuccess(p *Proposal, content string) *Output {
	return Success(p, ReadFileResult{Content: content})
}
