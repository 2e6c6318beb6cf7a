package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// The file content an observation shows takes at most
// max_observation_bytes in what the model is sent, escapes counted: a
// character sent as a \u escape (a zero-width space, 3 bytes, sent as 6; a
// tag character, 4 sent as 12; '<', 1 sent as 6) counts what it takes
// there. Before, the bound was held on the file's bytes, and a file of
// such characters reached the prompt at 2 to 6 times the bound; one under
// the bound by its bytes was sent whole at twice it.
func TestObservationBoundAsSent(t *testing.T) {
	const max = 1024
	files := map[string]string{
		"zw.txt":    strings.Repeat("\u200b", 2000),
		"tags.txt":  strings.Repeat("\U000E0041", 1000),
		"lt.txt":    strings.Repeat("<", 3000),
		"mixed.txt": strings.Repeat("a\u202e<é\u200d", 500),
		"small.txt": strings.Repeat("\u200b", 300), // 900 bytes: under the bound as a file
		"plain.txt": strings.Repeat("x", 3000),
	}
	names := []string{"zw.txt", "tags.txt", "lt.txt", "mixed.txt", "small.txt", "plain.txt"}
	r := newRig(t, testdb.SQLite(t))
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	task := r.send(t, "read them")
	var answers []string
	for _, name := range names {
		answers = append(answers, proposalJSON("READ_FILE", map[string]any{"path": "/sandbox/" + name}))
	}
	answers = append(answers, proposalJSON("FINISH", map[string]any{"response": "done"}))
	m := &scripted{answers: answers}
	got := r.runWith(t, func(c *agent.Config) { c.MaxObservationBytes = max }, m, task.ID,
		tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h, err := r.store.History(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			// What the next call sent after the step's answer.
			msgs := m.prompts[i+1]
			sent := msgs[len(msgs)-1].Content
			if o := h.Interactions[i].Observation; o == nil || o.Text != sent {
				t.Fatalf("the history's observation is not what was sent:\n%+v\n%s", o, sent)
			}
			if !utf8.ValidString(sent) {
				t.Fatalf("the observation is not UTF-8: %q", sent)
			}
			var fb struct {
				Output struct {
					Result struct {
						Content   jsontext.Value `json:"content"`
						Truncated bool           `json:"truncated"`
						Size      int            `json:"size"`
						Note      string         `json:"note"`
					} `json:"result"`
				} `json:"output"`
			}
			if err := json.Unmarshal([]byte(sent), &fb, json.RejectUnknownMembers(false)); err != nil {
				t.Fatalf("%s: %v", sent, err)
			}
			res := fb.Output.Result
			// The content as it stands in the text, its quotes aside.
			if n := len(res.Content) - 2; n > max {
				t.Errorf("the content takes %d bytes of the observation sent (%d in all); want at most %d", n, len(sent), max)
			}
			if len(sent) > max+400 {
				t.Errorf("the observation sent is %d bytes for a bound of %d", len(sent), max)
			}
			var content string
			if err := json.Unmarshal(res.Content, &content); err != nil {
				t.Fatal(err)
			}
			whole := files[name]
			if !res.Truncated {
				if content != whole {
					t.Errorf("not marked cut, but the content differs: %d bytes of %d", len(content), len(whole))
				}
				return
			}
			shown := strings.TrimSuffix(content, "…")
			if res.Size != len(whole) || !strings.HasPrefix(whole, shown) || shown == "" ||
				!strings.Contains(res.Note, "first "+itoa(len(shown))+" ") {
				t.Errorf("cut to %d bytes (size %d of %d), note %q: the marker must say what was kept", len(shown), res.Size, len(whole), res.Note)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
