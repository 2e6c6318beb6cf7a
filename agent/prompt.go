package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/snapnode/snapnode/schemas"
)

// builtinPrompt is the system prompt with the proposal schema, compacted.
var builtinPrompt = sync.OnceValue(func() string {
	raw, err := fs.ReadFile(schemas.FS, schemas.ProposalFile)
	if err != nil {
		panic(err) // embedded in the build
	}
	return systemPrompt + compactJSON(raw)
})

// systemPrompt is the model's role, the sandbox, the actions and the
// answer format. The proposal schema itself goes to servers that take a
// response_format json_schema; the text below states the same rules for
// those that do not.
const systemPrompt = `You are the agent of a snapnode host, working on one task for the requester below.
You act by proposing one action at a time. The host validates each proposal, judges it by its
operator's policy, runs it in a sandbox (an operator may have to confirm it) and tells you what
happened; then you propose the next action.

The workspace is /sandbox/: every path starts with /sandbox/. You cannot run commands, reach the
network or leave the workspace. Files you write, delete or rename must end in .txt or .md.

Answer every turn with exactly one JSON object and nothing else: no prose, no markdown fences.
Either a proposal:
  {"schema_version":"1.0.0","id":"<a new UUID v4>","reasoning":"<why this action>","action":"<ACTION>","args":{...}}
with one of these actions and args:
  THINK            {}                                  think aloud (put the thought in reasoning); no effect
  READ_FILE        {"path":"/sandbox/..."}
  LIST_FILES       {"path":"/sandbox/"}
  WRITE_FILE       {"path":"/sandbox/....md","content":"..."}   creates or replaces the file
  CREATE_DIRECTORY {"path":"/sandbox/..."}
  DELETE_FILE      {"path":"/sandbox/....txt"}
  RENAME_FILE      {"source":"/sandbox/....txt","destination":"/sandbox/....md"}
  FINISH           {"response":"<your answer to the requester>"}   ends the task
or an agent response, which ends your work on the task:
  {"action":"COMPLETED","evidence_files":["/sandbox/..."],"summary_for_supervisor":"<2-3 sentences>"}
  COMPLETED: the task is done; list every file you created or changed.
  STUCK: you cannot go on without a human; say what you need in the summary.
  RETRY: your approach failed; start this phase again from its beginning.
The summary is at most 500 characters. Never repeat an action that already failed the same way:
read the host's observation and change course.

The JSON Schema of a proposal:
`

// compactJSON is b without insignificant white space.
func compactJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

// estimateTokens is a rough count of the tokens of s: about four bytes a
// token for English and code. It errs on the high side for the budget.
func estimateTokens(s string) int { return estimateBytes(len(s)) }

// estimateBytes is estimateTokens of n bytes of text.
func estimateBytes(n int) int { return (n+3)/4 + 4 }

// leastTokens is the fewest tokens n bytes of text can be: no tokenizer
// in use packs ordinary text, code or JSON into fewer than one token for
// eight bytes.
func leastTokens(n int) int { return n / 8 }

// pricedTokens returns the token counts a model call is priced at: the
// server's own (reportedPrompt, reportedAnswer), but never fewer than the
// least its prompt (msgs) and its answer of answerBytes can be; a server
// that reports no usage at all is priced at the estimate of both. Else a
// server that sends no usage, or too little, would never reach the job's
// cost limit.
func pricedTokens(msgs []ChatMessage, reportedPrompt, reportedAnswer, answerBytes int) (prompt, answer int) {
	if reportedPrompt == 0 && reportedAnswer == 0 {
		return promptTokens(msgs), estimateBytes(answerBytes)
	}
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	return max(reportedPrompt, leastTokens(n)), max(reportedAnswer, leastTokens(answerBytes))
}

func promptTokens(msgs []ChatMessage) int {
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m.Content)
	}
	return n
}

// step is one earlier model call, as the prompt shows it; a step with
// only guidance stands for what was said in an earlier phase.
type step struct {
	guidance string // told before the call
	answer   string // the model's answer
	feedback string // the host's observation
	// condensed is feedback shortened for an old step; think marks a THINK.
	condensed string
	think     bool
}

// buildMessages makes the prompt of the next call within budget tokens:
// the system prompt, the task, the earlier steps and what the model is told
// now. When the whole does not fit, old observations are condensed (their
// long content replaced by a line naming it), THINK steps dropped, and
// then the oldest steps left out with a note; the last step is kept whole,
// and the one before it whenever the two fit. What the requester and
// operators said (guidance) is kept over any step; only when it alone
// passes the budget (a requester who wrote dozens of follow-ups) are its
// oldest messages left out, with a note, the newest always kept. The
// stored history keeps everything.
func buildMessages(system, task string, steps []step, now string, budget int) []ChatMessage {
	head := []ChatMessage{{Role: RoleSystem, Content: system}, {Role: RoleUser, Content: task}}
	render := func(from, unsaid int, condense bool) []ChatMessage {
		out := append([]ChatMessage(nil), head...)
		if from > 0 {
			out = append(out, ChatMessage{Role: RoleUser, Content: fmt.Sprintf("[%d earlier steps are left out to fit the context; their effects are in the workspace]", from)})
		}
		if unsaid > 0 {
			out = append(out, ChatMessage{Role: RoleUser, Content: fmt.Sprintf("[%d earlier messages from the requester or an operator are left out to fit the context; the newest follow]", unsaid)})
		}
		said := 0
		for i, s := range steps {
			recent := i >= len(steps)-2
			if s.guidance != "" {
				// Kept even when its step is dropped or left out: it is
				// what the requester or an operator said.
				if said++; said > unsaid {
					out = append(out, ChatMessage{Role: RoleUser, Content: s.guidance})
				}
			}
			if i < from || s.answer == "" && s.feedback == "" || condense && !recent && s.think {
				continue
			}
			if s.answer != "" {
				// An empty answer (a tool call's) is not sent back as
				// one: servers refuse an empty assistant message. Its
				// refusal is, or the model is asked the same again.
				out = append(out, ChatMessage{Role: RoleAssistant, Content: s.answer})
			}
			fb := s.feedback
			if condense && !recent && s.condensed != "" {
				fb = s.condensed
			}
			if fb != "" {
				out = append(out, ChatMessage{Role: RoleUser, Content: fb})
			}
		}
		if now != "" {
			out = append(out, ChatMessage{Role: RoleUser, Content: now})
		}
		return out
	}
	msgs := render(0, 0, false)
	if promptTokens(msgs) <= budget {
		return msgs
	}
	msgs = render(0, 0, true)
	// The last step is always sent whole, and the one before it whenever
	// the two fit.
	left := 0
	for from := 1; promptTokens(msgs) > budget && from < len(steps); from++ {
		msgs, left = render(from, 0, true), from
	}
	guidance := 0
	for _, s := range steps {
		if s.guidance != "" {
			guidance++
		}
	}
	// The smallest prompt that leaves out the fewest messages and fits,
	// or else the smallest of all.
	for unsaid, size := 1, promptTokens(msgs); size > budget && unsaid < guidance; unsaid++ {
		if m := render(left, unsaid, true); promptTokens(m) < size {
			msgs, size = m, promptTokens(m)
		}
	}
	return msgs
}

// condenseText is the short form of a long observation: what it was, its
// size and a hash, and that it can be read again.
func condenseText(action, outcome string, size int, sum string) string {
	return fmt.Sprintf("{\"outcome\":%q,\"action\":%q,\"condensed\":\"%d bytes (sha256 %s) left out to save context; read the file again if you need it\"}",
		outcome, action, size, sum)
}

// taskText is the first user message: the task's text.
func taskText(requester string, texts []string, workspace string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task from %s:\n", requester)
	for _, t := range texts {
		b.WriteString(t)
		b.WriteString("\n")
	}
	if workspace != "" {
		b.WriteString("\nThe workspace (/sandbox/) holds:\n")
		b.WriteString(workspace)
	}
	return b.String()
}
