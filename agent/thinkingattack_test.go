package agent_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A secret that straddles the point where a step's reasoning is cut (a
// PEM private key whose END line lies past agent.MaxReasoningBytes, the
// operator's secret split by the cut) is redacted from the history all
// the same, in each shape the reasoning comes in: the whole reasoning
// is redacted before it is cut. Before, the client cut the server's
// reasoning field to 8 KiB and the runtime redacted what was left: the
// key's BEGIN line and body, and the secret's start, no longer matched
// and were stored. A cut inside a character leaves valid UTF-8.
func TestReasoningRedactedBeforeItsCut(t *testing.T) {
	const secret = "hunter2-operator-secret-0123456789"
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + strings.Repeat("Qk9EWQ", 100) + "\n-----END RSA PRIVATE KEY-----"
	for _, straddle := range []struct {
		name, text string
		before     int // how many of its bytes come before the cut
	}{
		{"pem", pem, 100},
		{"secret", secret, 10},
		// Not a secret: the cut falls inside a character, and leaves
		// valid UTF-8.
		{"multi-byte", "€€€€", 1},
	} {
		thought := strings.Repeat("x", agent.MaxReasoningBytes-len("…")-straddle.before) + straddle.text + " so: read in-1.md"
		for _, shape := range []struct {
			name  string
			reply func(answer string) llmtest.Reply
		}{
			{"reasoning_content", func(answer string) llmtest.Reply { return llmtest.Reply{Content: answer, ReasoningContent: thought} }},
			{"reasoning", func(answer string) llmtest.Reply { return llmtest.Reply{Content: answer, Reasoning: thought} }},
			{"think block", func(answer string) llmtest.Reply { return llmtest.Text("<think>" + thought + "</think>" + answer) }},
		} {
			t.Run(straddle.name+"/"+shape.name, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				srv := llmtest.New(t)
				srv.Push(shape.reply(readAnswer(1)), shape.reply(finishAnswer))
				m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxResponseBytes: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				task := readingJob(t, r, 1)
				got := r.runWith(t, func(c *agent.Config) { c.Secrets = []string{secret} }, m, task.ID,
					tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
				if got.Status.State != tasks.StateCompleted {
					t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
				}
				h := validHistory(t, r, task.ID)
				for _, it := range h.Interactions {
					rs := it.Response.Reasoning
					if len(rs) > agent.MaxReasoningBytes || !utf8.ValidString(rs) {
						t.Errorf("step %d: reasoning of %d bytes, valid UTF-8 %t", it.Sequence, len(rs), utf8.ValidString(rs))
					}
					for _, leak := range []string{"MIIE", "Qk9EWQ", "PRIVATE KEY", "hunter2"} {
						if strings.Contains(rs, leak) || strings.Contains(it.Response.RawResponse, leak) {
							t.Errorf("step %d: the history keeps %q of the secret: …%s", it.Sequence, leak, rs[max(0, len(rs)-80):])
						}
					}
				}
			})
		}
	}
}

// A hostile server's <think> blocks: a </think> inside the object's
// strings after the block is the object's; CRLF is JSON's white space;
// NUL and invalid UTF-8 inside the block are the reasoning's, stored as
// valid UTF-8. A second </think>, a byte-order mark or a zero-width space
// before the block, two objects after it are refused.
func TestThinkBlockHostile(t *testing.T) {
	closeInString := strings.Replace(finishAnswer, `"reasoning":"done"`, `"reasoning":"done </think> really"`, 1)
	for _, c := range []struct {
		name, text string
		ok         bool
		reasoning  string
	}{
		{"close tag in a string", "<think>a</think>" + closeInString, true, "a"},
		{"crlf", "\r\n<think>\r\nb\r\n</think>\r\n" + finishAnswer + "\r\n", true, "b"},
		{"nul and invalid utf-8", "<think>c\x00d\xff\xfee</think>" + finishAnswer, true, "c\x00d\uFFFD\uFFFDe"},
		{"close tag twice", "<think>a</think> b </think>" + finishAnswer, false, ""},
		{"bom", "\uFEFF<think>a</think>" + finishAnswer, false, ""},
		{"zero-width space", "\u200B<think>a</think>" + finishAnswer, false, ""},
		{"two objects", "<think>a</think>" + finishAnswer + finishAnswer, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.SetHandler(func(llmtest.Request) llmtest.Reply { return llmtest.Text(c.text) })
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := r.send(t, "go")
			got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if completed := got.Status.State == tasks.StateCompleted; completed != c.ok {
				t.Fatalf("task %s %q; want completed %t", got.Status.State, got.Status.Message, c.ok)
			}
			h := validHistory(t, r, task.ID)
			if c.ok {
				if rs := h.Interactions[0].Response.Reasoning; rs != c.reasoning {
					t.Errorf("history reasoning %q; want %q", rs, c.reasoning)
				}
			}
			for _, it := range h.Interactions {
				if !utf8.ValidString(it.Response.Reasoning) {
					t.Errorf("step %d: reasoning %q is not valid UTF-8", it.Sequence, it.Response.Reasoning)
				}
			}
		})
	}
}
