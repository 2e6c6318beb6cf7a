package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// A node stops between the renames of a WRITE_FILE and the commit that
// records it promoted (here: killed once the write ran, its record then
// set back to promoting, as a crash or a backup copy taken at that moment
// leaves it), and the file is then edited by hand. The node must still
// start: it leaves the file as it was edited, fails the task with a
// message naming the file, the hashes and what to check, and says so at
// warn level. Before, the start stopped: `node: executor: executor:
// recover …: sandbox: recover "/sandbox/once.md": changed since
// promotion`, and every other task went unserved.
func TestStartOverAFileChangedSinceAnInterruptedPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	first := startChildNode(t, dataDir, "ran")
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	client := newHTTPClientWith(t, k)
	body, _ := json.Marshal(proposal("WRITE_FILE", map[string]any{"path": "/sandbox/once.md", "content": "once\n"}))
	lost := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.Send(ctx, first.url, &snap.Message{To: first.addr, Method: "message/send", Payload: body})
		lost <- err
	}()
	first.kill(t, "ran", lost)

	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	var taskID string
	if err := db.R.QueryRowContext(ctx, `SELECT task FROM executor_actions WHERE action = 'WRITE_FILE'`).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctx, `UPDATE executor_actions SET state = 'promoting' WHERE task = ?`, taskID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	file := filepath.Join(dataDir, "sandbox", "once.md")
	if err := os.WriteFile(file, []byte("edited by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	nctx, cancel := context.WithCancel(ctx)
	n, err := node.Start(nctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		cancel()
		t.Fatalf("the node does not start: %v", err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })

	payload, _ := json.Marshal(map[string]any{"taskId": taskID})
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	resp, err := client.Send(rctx, n.HTTPURL()+"/snap", &snap.Message{To: n.Address(), Method: "tasks/get", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	v := taskOf(t, p)
	for _, want := range []string{"/sandbox/once.md", sha256Hex("edited by hand\n"), "left as found"} {
		if v.Status.State != "failed" || !strings.Contains(v.Status.Message, want) {
			t.Errorf("task %s %q; want failed, naming %q", v.Status.State, v.Status.Message, want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "edited by hand\n" {
		t.Errorf("once.md = %q, %v; want it as edited", b, err)
	}
	var warned bool
	for line := range strings.Lines(logs.String()) {
		warned = warned || (strings.Contains(line, "level=WARN") && strings.Contains(line, "/sandbox/once.md") && strings.Contains(line, "changed since"))
	}
	if !warned {
		t.Errorf("no warning naming the file in:\n%s", logs.String())
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
