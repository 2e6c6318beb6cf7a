package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A workspace file the task names goes with the task's first message
// with what a reader cannot see spelled out, as a READ_FILE observation of
// the same file shows it: tag characters (text a model reads and a human
// does not), a bidi override, a zero-width space and a terminal escape
// sequence are \u escapes there, the file's lines and tabs kept. Before,
// the file's text went into the prompt as it was, so a file another peer
// wrote could give the model instructions the operator reading the history
// does not see.
func TestContextFileInvisibleEscaped(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	hidden := "\U000E0049\U000E0047\U000E004E" // "IGN" in tag characters
	content := "line one\tcol\nrtl \u202egnp.exe\n" + hidden + "zero\u200bwidth \x1b[31mred\n"
	if err := os.WriteFile(filepath.Join(r.dir, "notes.md"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &promptRecorder{}
	task := fuSend(t, r, "", "summarise notes.md")
	r.run(t, m, task.ID, tasks.StateCompleted)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.prompts) == 0 || len(m.prompts[0]) < 2 {
		t.Fatalf("prompts: %v", m.prompts)
	}
	text := m.prompts[0][1].Content
	for _, want := range []string{
		"The file /sandbox/notes.md (" + itoa(len(content)) + " bytes) holds:\n",
		"line one\tcol\nrtl \\u202egnp.exe\n",
		`\udb40\udc49\udb40\udc47\udb40\udc4ezero\u200bwidth \u001b[31mred`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the task message lacks %q:\n%s", want, text)
		}
	}
	for _, r := range text {
		if r != '\n' && r != '\t' && invisible.Is(r) {
			t.Errorf("the task message holds %U as it is:\n%q", r, text)
		}
	}
}
