package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
)

// The interactions below are built as the loop stores them: a proposal's
// raw answer, kind and action, and the observation fed back.

var stuckT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// stuckID is a distinct, well-formed proposal id for each n.
func stuckID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// stuckProposed is a stored proposal with its observation (nil: none yet).
func stuckProposed(n int, action, reasoning, args string, obs *Observation) Interaction {
	return Interaction{Sequence: n, Timestamp: stuckT0.Add(time.Duration(n) * time.Second), StateBefore: Running,
		Response: Response{Status: ResponseSuccess, Kind: KindProposal, Action: action,
			RawResponse: answerProposal(stuckID(n), reasoning, action, args), NewStatus: Running},
		Observation: obs}
}

func stuckCompleted(text string) *Observation { return &Observation{Outcome: ObsCompleted, Text: text} }

func stuckFailed(reason string) *Observation {
	return &Observation{Outcome: ObsFailed, Reason: reason, Text: `{"outcome":"failed","reason":"` + reason + `"}`}
}

// stuckRead is READ_FILE of path, which showed content.
func stuckRead(n int, path, content string) Interaction {
	return stuckProposed(n, "READ_FILE", fmt.Sprintf("step %d: read %s", n, path), `{"path":"`+path+`"}`,
		stuckCompleted(`{"outcome":"completed","action":"READ_FILE","output":"`+content+`"}`))
}

// stuckWriteFailed is WRITE_FILE of path, which failed for reason.
func stuckWriteFailed(n int, path, reason string) Interaction {
	return stuckProposed(n, "WRITE_FILE", "write it", `{"path":"`+path+`","content":"x"}`, stuckFailed(reason))
}

func stuckThink(n int, thought string) Interaction {
	return stuckProposed(n, "THINK", thought, `{}`, stuckCompleted(`{"outcome":"completed","action":"THINK"}`))
}

func stuckInvalid(n int, reason string) Interaction {
	return Interaction{Sequence: n, Timestamp: stuckT0, StateBefore: Running,
		Response:    Response{Status: ResponseSuccess, Kind: KindInvalid, RawResponse: "Sure! " + reason, Error: reason, NewStatus: Running},
		Observation: &Observation{Outcome: ObsInvalid, Reason: reason, Text: "Your answer was refused: " + reason}}
}

// stuckAPIError is a failed model call. withObs gives it a failed observation
// too, which the loop never stores but detectStuck must ignore anyway.
func stuckAPIError(n int, msg string, withObs bool) Interaction {
	it := Interaction{Sequence: n, Timestamp: stuckT0, StateBefore: Running,
		Response: Response{Status: ResponseError, Kind: KindAPIError, Error: msg, NewStatus: Running}}
	if withObs {
		it.Observation = stuckFailed(msg)
	}
	return it
}

// stuckSeq numbers the interactions made by the makers in order.
func stuckSeq(makers ...func(n int) Interaction) []Interaction {
	out := make([]Interaction, len(makers))
	for i, m := range makers {
		out[i] = m(i)
	}
	return out
}

func stuckRepeat(k int, m func(n int) Interaction) []func(n int) Interaction {
	out := make([]func(n int) Interaction, k)
	for i := range out {
		out[i] = m
	}
	return out
}

func TestDetectStuck(t *testing.T) {
	readA := func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "alpha") }
	readB := func(n int) Interaction { return stuckRead(n, "/sandbox/b.md", "beta") }
	list := func(n int) Interaction {
		return stuckProposed(n, "LIST_FILES", "look around", `{"path":"/sandbox/"}`, stuckCompleted(`{"outcome":"completed"}`))
	}
	sameThought := func(n int) Interaction { return stuckThink(n, "the notes disagree on the date") }
	otherThought := func(n int) Interaction { return stuckThink(n, fmt.Sprintf("thought number %d", n)) }
	denied := func(path string) func(n int) Interaction {
		return func(n int) Interaction {
			return stuckWriteFailed(n, path, "PATH_NOT_ALLOWED: /etc is outside the sandbox")
		}
	}
	refused := func(n int) Interaction { return stuckInvalid(n, "the answer is not a single JSON object") }
	api := func(n int) Interaction { return stuckAPIError(n, "model server: HTTP 503: overloaded", false) }
	apiWithObs := func(n int) Interaction { return stuckAPIError(n, "model server: HTTP 503: overloaded", true) }
	// interrupted is a WRITE_FILE a crash cut short mid-promotion and the
	// next start undid: the node's stop, not the model's error.
	interrupted := func(n int) Interaction {
		return stuckWriteFailed(n, "/sandbox/out.md", executor.ReasonInterrupted)
	}

	tests := []struct {
		name string
		its  []Interaction
		// fireAt is the number of interactions at which want first fires;
		// every shorter prefix must find nothing. 0: never fires.
		want   string
		fireAt int
	}{
		{"nothing", nil, "", 0},
		{"one read", stuckSeq(readA), "", 0},
		{"repeated action", stuckSeq(stuckRepeat(4, readA)...), PatternRepeatedAction, 4},
		{"repeated action after others", stuckSeq(list, readB, readA, readA, readA, readA), PatternRepeatedAction, 6},
		{"repeated action, ids and reasoning differ", stuckSeq(
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "alpha") },
			func(n int) Interaction {
				it := stuckRead(n, "/sandbox/a.md", "alpha")
				it.Response.RawResponse = answerProposal(stuckID(99), "another reason", "READ_FILE", `{ "path" : "/sandbox/a.md" }`)
				return it
			},
			readA, readA), PatternRepeatedAction, 4},
		{"same action, changing observation", stuckSeq(
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "v1") },
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "v2") },
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "v3") },
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "v4") },
			func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "v5") }), "", 0},
		{"three reads, a list, a read", stuckSeq(readA, readA, readA, list, readA), "", 0},

		{"repeated error", stuckSeq(denied("/sandbox/a.md"), denied("/sandbox/b.md"), denied("/sandbox/c.md")), PatternRepeatedError, 3},
		{"repeated error after a success", stuckSeq(readA, denied("/sandbox/a.md"), denied("/sandbox/b.md"), denied("/sandbox/c.md")), PatternRepeatedError, 4},
		{"repeated invalid answers", stuckSeq(refused, refused, refused), PatternRepeatedError, 3},
		{"different errors", stuckSeq(
			func(n int) Interaction { return stuckWriteFailed(n, "/sandbox/a.md", "one") },
			func(n int) Interaction { return stuckWriteFailed(n, "/sandbox/b.md", "two") },
			func(n int) Interaction { return stuckWriteFailed(n, "/sandbox/c.md", "three") }), "", 0},
		{"an error between successes", stuckSeq(denied("/sandbox/a.md"), denied("/sandbox/b.md"), readA, denied("/sandbox/c.md")), "", 0},
		{"api errors", stuckSeq(stuckRepeat(5, api)...), "", 0},
		{"api errors with an observation", stuckSeq(stuckRepeat(5, apiWithObs)...), "", 0},
		{"api error does not complete a run", stuckSeq(denied("/sandbox/a.md"), denied("/sandbox/b.md"), apiWithObs), "", 0},
		{"actions interrupted by crashes", stuckSeq(stuckRepeat(5, interrupted)...), "", 0},
		{"an interrupted action does not complete a run", stuckSeq(denied("/sandbox/a.md"), denied("/sandbox/b.md"), interrupted), "", 0},
		{"an interrupted action does not break a run", stuckSeq(denied("/sandbox/a.md"), interrupted, denied("/sandbox/b.md"), denied("/sandbox/c.md")), PatternRepeatedError, 4},

		{"different thoughts", stuckSeq(stuckRepeat(7, otherThought)...), "", 0},
		{"identical thoughts", stuckSeq(sameThought, sameThought, sameThought), PatternMonologue, 3},
		{"identical thoughts after an action", stuckSeq(readA, sameThought, sameThought, sameThought), PatternMonologue, 4},
		{"identical thoughts need not be consecutive", stuckSeq(sameThought, otherThought, sameThought, sameThought), PatternMonologue, 4},
		{"lower-case think", stuckSeq(stuckRepeat(3, func(n int) Interaction {
			it := stuckThink(n, "hmm")
			it.Response.Action = "think"
			it.Response.RawResponse = answerProposal(stuckID(n), "hmm", "think", `{}`)
			return it
		})...), PatternMonologue, 3},
		{"identical thoughts split by an action", stuckSeq(sameThought, sameThought, readA, sameThought, sameThought), "", 0},
		{"eight distinct thoughts", stuckSeq(stuckRepeat(8, otherThought)...), PatternMonologue, 8},
		{"seven thoughts, a read, a thought", stuckSeq(append(stuckRepeat(7, otherThought), readA, otherThought)...), "", 0},

		{"oscillation", stuckSeq(readA, readB, readA, readB, readA, readB), PatternOscillation, 6},
		{"oscillation after others", stuckSeq(list, readA, readB, readA, readB, readA, readB), PatternOscillation, 7},
		{"A-B-A-B-A-C", stuckSeq(readA, readB, readA, readB, readA, list), "", 0},
		{"A-B-A-B then C", stuckSeq(readA, readB, readA, readB, list), "", 0},
		{"A-B-B-A-A-B", stuckSeq(readA, readB, readB, readA, readA, readB), "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last := len(tt.its)
			if tt.fireAt > 0 {
				last = tt.fireAt // past the threshold, the verdict is the loop's to act on
			}
			for k := 0; k <= last; k++ {
				got, why := detectStuck(tt.its[:k])
				want := ""
				if k == tt.fireAt {
					want = tt.want
				}
				if got != want {
					t.Fatalf("after %d of %d steps: %q (%s); want %q", k, len(tt.its), got, why, want)
				}
				if (got == "") != (why == "") {
					t.Errorf("after %d steps: pattern %q with reason %q", k, got, why)
				}
			}
		})
	}
}

// TestDetectStuckReplay: detectStuck reads only what is stored, so the
// history read back from its JSON gives the same verdict.
func TestDetectStuckReplay(t *testing.T) {
	readA := func(n int) Interaction { return stuckRead(n, "/sandbox/a.md", "alpha") }
	readB := func(n int) Interaction { return stuckRead(n, "/sandbox/b.md", "beta") }
	cases := [][]Interaction{
		stuckSeq(stuckRepeat(4, readA)...),
		stuckSeq(readA, readB, readA, readB, readA, readB),
		stuckSeq(stuckRepeat(3, func(n int) Interaction { return stuckThink(n, "same") })...),
		stuckSeq(stuckRepeat(3, func(n int) Interaction { return stuckWriteFailed(n, fmt.Sprintf("/sandbox/%d.md", n), "denied") })...),
		stuckSeq(readA, readB),
	}
	for i, its := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b, err := json.Marshal(its)
			if err != nil {
				t.Fatal(err)
			}
			var back []Interaction
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			p1, w1 := detectStuck(its)
			p2, w2 := detectStuck(back)
			if p1 != p2 || w1 != w2 {
				t.Errorf("stored %q (%s); replayed %q (%s)", p1, w1, p2, w2)
			}
		})
	}
}

func TestDetectStuckReason(t *testing.T) {
	long := fmt.Sprintf("%0300d", 7) + "é"
	its := stuckSeq(stuckRepeat(3, func(n int) Interaction { return stuckWriteFailed(n, fmt.Sprintf("/sandbox/%d.md", n), long) })...)
	p, why := detectStuck(its)
	if p != PatternRepeatedError {
		t.Fatalf("pattern %q; want %q", p, PatternRepeatedError)
	}
	if len(why) > 300 {
		t.Errorf("reason of %d bytes; want the error cut to about 200", len(why))
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"},  // never splits a rune
		{"ééé", 3, "é…"}, // 3 falls inside the second é
		{"", 0, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.s, tt.n), func(t *testing.T) {
			if got := cut(tt.s, tt.n); got != tt.want {
				t.Errorf("cut(%q, %d) = %q; want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}
