package node_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A job whose history passes agent.max_history_bytes works on: its oldest
// interactions move into archive segments (sealed for a sensitive node),
// and the history reads whole, in order, and replays (checked as the node
// stops, with every job's).
func TestAgentHistoryArchived(t *testing.T) {
	for _, c := range []struct {
		name      string
		dsn       func(testing.TB) string
		sensitive bool
	}{{"sqlite", testdb.SQLite, false}, {"postgres", testdb.Postgres, false}, {"sqlite sensitive", testdb.SQLite, true}} {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.dsn(t)
			keyPath := filepath.Join(t.TempDir(), "history.key")
			if err := os.WriteFile(keyPath, []byte(hex.EncodeToString([]byte(strings.Repeat("k", 32)))), 0o600); err != nil {
				t.Fatal(err)
			}
			a := startAgentNode(t, dsn, func(cfg *config.Config) {
				cfg.Agent.MaxHistoryBytes = 16 << 10
				cfg.Agent.Sensitive = c.sensitive
				if c.sensitive {
					cfg.Agent.HistoryKeyFile = keyPath
				}
			})
			var answers []string
			for i := range 6 {
				answers = append(answers, prop("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/part%d.md", i), "content": strings.Repeat("text ", 200)}))
			}
			answers = append(answers, prop("FINISH", map[string]any{"response": "six parts written"}))
			for _, ans := range answers {
				a.llm.Push(llmtest.Text(ans))
			}
			id := a.send(t, "", "write six parts")
			if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			st := a.Agent().Store()
			segs, err := st.Segments(context.Background(), id)
			if err != nil || segs == 0 {
				t.Fatalf("%d archive segments, %v", segs, err)
			}
			var live int
			if err := a.DB.R.QueryRow(a.DB.Dialect.Rebind(`SELECT COUNT(*) FROM agent_interactions WHERE task_id = ?`), id).Scan(&live); err != nil || live == 0 || live >= len(answers) {
				t.Fatalf("%d interactions left in the live table, %v", live, err)
			}
			h := a.history(t, id)
			if len(h.Interactions) != len(answers) {
				t.Fatalf("%d interactions, want %d", len(h.Interactions), len(answers))
			}
			for i, it := range h.Interactions {
				if it.Sequence != i || it.Response.RawResponse != answers[i] {
					t.Fatalf("interaction %d: sequence %d, answer %s", i, it.Sequence, it.Response.RawResponse)
				}
			}
			if c.sensitive {
				db := a.DB
				var body []byte
				if err := db.R.QueryRow(db.Dialect.Rebind(`SELECT body FROM agent_history_segments WHERE task_id = ? AND idx = 0`), id).Scan(&body); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(body), "write six parts") {
					t.Fatal("a sensitive job's archive holds its prompt in clear")
				}
			}
		})
	}
}
