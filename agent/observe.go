package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/schemas"
)

func newHolder() string { return "agent-" + uuid.NewString() }

// shortHash is the hex SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// answerSchema is what the model may answer, one self-contained JSON
// Schema for response_format.
var answerSchema = schemas.AgentAnswerBundle

// outcomeOf is the observation's word for res's outcome.
func outcomeOf(res *executor.Result) string {
	switch res.Outcome {
	case executor.Completed:
		return ObsCompleted
	case executor.Failed:
		return ObsFailed
	}
	return ObsNeedsConfirmation
}

// observe turns an executor result into what the model is told: the
// outcome and the runtime output (the executor's success output or
// structured error, see executor.Result.Output), with a file's content
// cut to max bytes as the model is sent it (the model is told it was cut,
// how much was kept, the size and the hash; see sentLen).
func observe(res *executor.Result, max int) *Observation {
	o := &Observation{ActionID: res.ActionID, Reason: res.Reason, Diff: res.Diff, Outcome: outcomeOf(res)}
	out := json.RawMessage(invisible.EscapeJSON(boundOutput(res.Output, max)))
	o.Output = out
	fb := map[string]any{"outcome": o.Outcome, "action": res.Action}
	if len(out) > 0 {
		fb["output"] = out
	}
	switch res.Outcome {
	case executor.NeedsConfirmation:
		fb["note"] = "an operator must confirm this action; the job waits for the decision: " + res.Reason
	case executor.Failed:
		fb["reason"] = res.Reason
	}
	if res.Diff != "" && sentStringLen(res.Diff) <= max {
		fb["diff"] = res.Diff
	}
	b, _ := json.Marshal(fb)
	o.Text = string(invisible.EscapeJSON(b))
	return o
}

// boundOutput cuts a READ_FILE result's content, or any other output as
// a whole, to max bytes as the model is sent them, saying so.
func boundOutput(out json.RawMessage, max int) json.RawMessage {
	if len(out) == 0 || sentLen(out) <= max {
		return out
	}
	var o struct {
		Status string `json:"status"`
		Action string `json:"action"`
		Result *struct {
			Content  string `json:"content"`
			Encoding string `json:"encoding,omitempty"`
		} `json:"result"`
	}
	if json.Unmarshal(out, &o) != nil || o.Result == nil || sentStringLen(o.Result.Content) <= max {
		head, kept := fit(string(out), max)
		b, _ := json.Marshal(map[string]any{"truncated": true, "size": len(out), "head": head,
			"note": shownNote(kept, len(out))})
		return b
	}
	content, kept := fit(o.Result.Content, max)
	sum := sha256.Sum256([]byte(o.Result.Content))
	b, _ := json.Marshal(map[string]any{"status": o.Status, "action": o.Action, "result": map[string]any{
		"content": content, "encoding": o.Result.Encoding, "truncated": true,
		"size": len(o.Result.Content), "sha256": hex.EncodeToString(sum[:]),
		"note": shownNote(kept, len(o.Result.Content))}})
	return b
}

// shownNote says how much of size bytes a cut observation shows.
func shownNote(kept, size int) string {
	return fmt.Sprintf("only the first %d bytes of %d are shown", kept, size)
}

// sentLen is how many bytes the JSON text v takes in the text the model
// is sent (observe's Text): compacted, '<', '>' and '&' escaped (as
// json.Marshal writes a json.RawMessage), and every character
// invisible.EscapeJSON escapes written as its \u escape. JSON text that
// is not valid takes more than any bound.
func sentLen(v json.RawMessage) int {
	b, err := json.Marshal(json.RawMessage(invisible.EscapeJSON(v)))
	if err != nil {
		return math.MaxInt
	}
	return len(b)
}

// sentStringLen is how many bytes s takes in the text the model is sent
// as a JSON string, its quotes aside: its escapes included, never fewer
// than len(s).
func sentStringLen(s string) int {
	b, _ := json.Marshal(s)
	return sentLen(b) - 2
}

// cutMark ends a cut text.
const cutMark = "…"

// fit is the longest beginning of s, cut between characters, that with
// cutMark after it takes at most max bytes as the model is sent it
// (sentStringLen), and how many bytes of s it keeps. With no room for
// the mark, it is empty.
func fit(s string, max int) (string, int) {
	room := max - len(cutMark)
	if room <= 0 {
		return "", 0
	}
	// A character is never sent in fewer bytes than it has: the
	// beginning sought is among the first room bytes.
	start := func(k int) int {
		for k > 0 && k < len(s) && !utf8.RuneStart(s[k]) {
			k--
		}
		return k
	}
	k := sort.Search(min(len(s), room)+1, func(k int) bool { return sentStringLen(s[:start(k)]) > room })
	n := start(k - 1)
	return s[:n] + cutMark, n
}
