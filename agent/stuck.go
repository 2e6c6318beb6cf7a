package agent

import (
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/textcut"
)

// The stuck patterns, as named in a STUCK job's reason.
const (
	PatternRepeatedAction = "repeated_action" // the same action with the same observation 4 times
	PatternRepeatedError  = "repeated_error"  // the same error 3 times
	PatternMonologue      = "monologue"       // THINK after THINK without acting
	PatternOscillation    = "oscillation"     // A-B-A-B-A-B
	PatternContextWindow  = "context_window"  // context-length errors again after condensing
)

// Thresholds of the stuck patterns.
const (
	repeatedActions  = 4
	repeatedErrors   = 3
	identicalThinks  = 3
	consecutiveThink = 8
	oscillationSteps = 6
)

// detectStuck looks at the steps of the current phase, oldest first, and
// names the pattern they end in, or "" when the job is not stuck. It reads
// only what is stored, so a replay of the history finds the same verdict.
func detectStuck(all []Interaction) (pattern, why string) {
	// A failed model call is not a step of the model's, nor is an action
	// the node's crash cut short (undone at the next start): neither
	// breaks nor extends a pattern (model calls' retries and a job's
	// steps have their own limits).
	its := make([]Interaction, 0, len(all))
	for _, it := range all {
		if it.Response.Kind != KindAPIError && it.Response.Kind != KindCanceled && !interrupted(it) {
			its = append(its, it)
		}
	}
	// Every pattern looks at the last consecutiveThink steps at most.
	if len(its) > consecutiveThink {
		its = its[len(its)-consecutiveThink:]
	}
	n := len(its)
	key := func(it Interaction) string {
		k := it.Response.Kind + "|" + it.Response.Action + "|" + actionKey(it)
		if it.Observation != nil {
			k += "|" + it.Observation.Outcome + "|" + it.Observation.Text
		}
		return k
	}
	if n >= repeatedActions {
		last := its[n-repeatedActions:]
		same := last[0].Response.Kind == KindProposal
		for _, it := range last[1:] {
			same = same && key(it) == key(last[0])
		}
		if same {
			return PatternRepeatedAction, "the same action (" + last[0].Response.Action + ") gave the same observation 4 times in a row"
		}
	}
	if n >= repeatedErrors {
		last := its[n-repeatedErrors:]
		e0 := errorOf(last[0])
		same := e0 != ""
		for _, it := range last[1:] {
			same = same && errorOf(it) == e0
		}
		if same {
			return PatternRepeatedError, "the same error 3 times in a row: " + cut(e0, 200)
		}
	}
	thinks, identical := 0, 0
	for i := n - 1; i >= 0 && isThink(its[i]); i-- {
		thinks++
		if its[i].Response.RawResponse != "" && reasoningOf(its[i]) == reasoningOf(its[n-1]) {
			identical++
		}
	}
	if identical >= identicalThinks || thinks >= consecutiveThink {
		return PatternMonologue, "THINK after THINK without an action"
	}
	if n >= oscillationSteps {
		last := its[n-oscillationSteps:]
		a, b := key(last[0]), key(last[1])
		alt := a != b
		for i, it := range last {
			want := a
			if i%2 == 1 {
				want = b
			}
			alt = alt && key(it) == want
		}
		if alt {
			return PatternOscillation, "the job alternates between two actions (" + last[0].Response.Action + ", " + last[1].Response.Action + ") without progress"
		}
	}
	return "", ""
}

func isThink(it Interaction) bool {
	return it.Response.Kind == KindProposal && (it.Response.Action == "THINK" || it.Response.Action == "think")
}

// actionKey is what a proposal asks for, without its id and reasoning.
func actionKey(it Interaction) string {
	if it.Response.Kind != KindProposal {
		return ""
	}
	a, _ := parseModelAnswer(it.Response.RawResponse, 1<<30)
	if a == nil {
		return ""
	}
	if isThink(it) {
		return a.Key + " " + a.Reasoning // a THINK is its thought
	}
	return a.Key
}

func reasoningOf(it Interaction) string {
	a, _ := parseModelAnswer(it.Response.RawResponse, 1<<30)
	if a == nil {
		return ""
	}
	return a.Reasoning
}

// interrupted reports whether its action was cut short by the node's
// stop and undone (executor.ReasonInterrupted).
func interrupted(it Interaction) bool {
	return it.Observation != nil && it.Observation.Outcome == ObsFailed && it.Observation.Reason == executor.ReasonInterrupted
}

// errorOf is the error an interaction ended in, "" when none.
func errorOf(it Interaction) string {
	switch {
	case it.Response.Kind == KindAPIError:
		return "" // the model server's failures have their own retries
	case it.Observation == nil:
		return ""
	case it.Observation.Outcome == ObsFailed || it.Observation.Outcome == ObsInvalid:
		return it.Observation.Reason
	}
	return ""
}

func cut(s string, n int) string {
	return textcut.Shorten(s, n, "…")
}
