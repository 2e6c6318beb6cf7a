package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// An agent job that waits for a human (the model server refused the
// node's request: INTERVENTION_REQUIRED, its task input_required) keeps
// waiting across a SIGKILL and restart: the restarted node neither fails
// the task nor asks the model again on its own. The requester's message
// then resumes it, and a second SIGKILL right after that message was
// accepted loses nothing: restarted again, the job goes on from the
// message, its write is carried out exactly once, and the task completes
// with the model's answer; its history replays and `snapnode audit
// verify` passes.
func TestAgentWaitForHumanSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	var mended atomic.Bool // the model server refuses (401) until then
	var calls atomic.Int64
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	job := regexp.MustCompile(`wait job: write (\S+) with (\S+)`)
	d := startChaosNode(t, dir, dataDir, "1m", job, func(all string, m []string) llmtest.Reply {
		calls.Add(1)
		switch {
		case !mended.Load():
			return llmtest.Error(401, "invalid API key")
		case strings.Contains(all, `"action":"WRITE_FILE"`) && strings.Contains(all, `"outcome":"completed"`):
			return finish("wrote " + m[1])
		default:
			return llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/" + m[1], "content": m[2] + "\n"}))
		}
	})
	cl := chaosClients(t, 1)[0]
	c := &chaosTask{n: 0, kind: chaosAgent, client: cl}
	send := func(d *testutil.Daemon, s, taskID string) *snap.Message {
		t.Helper()
		p := text(s)
		p["message"].(map[string]any)["messageId"] = uuid.NewString()
		if taskID != "" {
			p["taskId"] = taskID
		}
		body, _ := json.Marshal(p)
		msg := &snap.Message{To: d.Address, Method: "message/send", Payload: body}
		v, err := chaosSend(t, d, cl, msg)
		if err != nil {
			t.Fatalf("message/send %q: %v", s, err)
		}
		c.id = v.ID
		return msg
	}
	waitFor := func(d *testutil.Daemon, state string) taskView {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v := chaosGet(t, d, c)
			if v.Status.State == state {
				return v
			}
			if v.Status.State == "failed" || v.Status.State == "canceled" || time.Now().After(deadline) {
				t.Fatalf("task %s is %s %q; want %s", c.id, v.Status.State, v.Status.Message, state)
			}
			time.Sleep(20 * time.Millisecond) // the agent works on it
		}
	}

	send(d, "wait job: write waited.md with token-waited", "")
	waitFor(d, "input_required")
	before := calls.Load()

	d.Kill(t)
	d = d.Restart(t)
	if v := chaosGet(t, d, c); v.Status.State != "input_required" {
		t.Fatalf("after the restart the waiting task is %s %q; want input_required", v.Status.State, v.Status.Message)
	}

	// The requester's message resumes it; the node is killed as soon as
	// the message is accepted.
	mended.Store(true)
	msg := send(d, "go on", c.id)
	d.Kill(t)
	d = d.Restart(t)
	if _, err := chaosSend(t, d, cl, msg); err != nil { // a retry of the message whose answer may be lost
		t.Fatalf("retry of the message: %v", err)
	}
	v := waitFor(d, "completed")
	if v.Status.Message != "wrote waited.md" {
		t.Errorf("the task completed with %q; want the model's answer", v.Status.Message)
	}
	if calls.Load() <= before {
		t.Errorf("the model was not asked again after the message")
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "sandbox", "waited.md")); err != nil || string(b) != "token-waited\n" {
		t.Errorf("waited.md = %q, %v", b, err)
	}
	d.Kill(t)

	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	defer db.Close()
	var writes, promoted int
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM executor_actions WHERE task = ? AND action = 'WRITE_FILE' AND state = 'promoted'`, c.id).Scan(&writes); err != nil {
		t.Fatal(err)
	}
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`, c.id).Scan(&promoted); err != nil {
		t.Fatal(err)
	}
	if writes != 1 || promoted != 1 {
		t.Errorf("%s", fmt.Sprintf("%d writes promoted and %d promotions audited for the task; want 1 and 1", writes, promoted))
	}
	chaosAuditTrails(t, db, map[string]string{c.id: "completed"})
	chaosAuditVerify(t, "--data-dir", dataDir)
	chaosJobReplay(t, dataDir)
}
