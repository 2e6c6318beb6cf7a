package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// The harness the SIGKILL tests share: TestChaosSIGKILL,
// TestChaosHeldSIGKILL and TestReplicasSIGKILL.

// chaosRunSeed is seed, the flag's, or a new one when it is 0.
func chaosRunSeed(seed uint64) uint64 {
	if seed == 0 {
		return uint64(time.Now().UnixNano())
	}
	return seed
}

// chaosClients makes n requesters, each with an identity of its own.
func chaosClients(t *testing.T, n int) []*client.HTTP {
	t.Helper()
	var clients []*client.HTTP
	for range n {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, newHTTPClientWith(t, k))
	}
	return clients
}

// startChaosNode starts `snapnode run` on dataDir, its config in dir
// setting the agent's lease and a 10 ms retry backoff, with no rate limits
// and 8 agent jobs at once. Its model is a scripted server that answers a
// request whose text job matches with reply (the whole text and job's
// submatches), any other with an error.
func startChaosNode(t *testing.T, dir, dataDir, lease string, job *regexp.Regexp, reply func(all string, m []string) llmtest.Reply) *testutil.Daemon {
	t.Helper()
	srv := llmtest.New(t)
	srv.SetHandler(func(r llmtest.Request) llmtest.Reply {
		all := requestText(r)
		m := job.FindStringSubmatch(all)
		if m == nil {
			return llmtest.Error(400, "chaos model: no job in the request")
		}
		return reply(all, m)
	})
	conf := filepath.Join(dir, "snapnode.toml")
	if err := os.WriteFile(conf, []byte("[agent]\nlease = \""+lease+"\"\nretry_backoff = \"10ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: dataDir, Args: []string{
		"--config", conf, "--http-listen", "127.0.0.1:0", "--llm-url", srv.URL(), "--llm-model", llmtest.DefaultModel,
		"--http-rate", "0", "--identity-rate", "0", "--agent-max-jobs", "8",
	}})
}

// chaosSend sends (or sends again) msg, a message/send creating a task, to
// d by cl and returns the task answered. An answer with an error is an
// error; 2006 fails the test besides: the request's replay record is
// written in the task's own commit, with its answer, so a retry after a
// kill finds either nothing (and is processed) or the task (and is
// answered with it, deduplicated), never a record without its task.
func chaosSend(t *testing.T, d *testutil.Daemon, cl *client.HTTP, msg *snap.Message) (taskView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Send(ctx, d.HTTPURL, msg)
	if err != nil {
		return taskView{}, err
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		return taskView{}, err
	}
	if p["error"] != nil {
		if code, _ := p["error"].(map[string]any)["code"].(float64); int(code) == int(snap.CodeDuplicateMessage) {
			t.Errorf("message %s: a retry refused as a duplicate (%v): the node holds its record without its task", msg.ID, p["error"])
		}
		return taskView{}, fmt.Errorf("answered %v", p["error"])
	}
	return taskOf(t, p), nil
}

// chaosAuditVerify fails the test unless `snapnode audit verify`, with
// args (the data folder, and what else the node was started with),
// passes.
func chaosAuditVerify(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(testutil.Binary(t), append([]string{"audit", "verify"}, args...)...).CombinedOutput(); err != nil {
		t.Errorf("snapnode audit verify: %v\n%s", err, out)
	}
}

// chaosJobReplay: every agent job in the data folder replays.
func chaosJobReplay(t *testing.T, dataDir string) {
	t.Helper()
	out, err := exec.Command(testutil.Binary(t), "job", "list", "--data-dir", dataDir).Output()
	if err != nil {
		t.Fatalf("snapnode job list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			TaskID string `json:"job_id"`
			ID     string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("job list line %q: %v", line, err)
		}
		id := m.TaskID
		if id == "" {
			id = m.ID
		}
		n++
		if out, err := exec.Command(testutil.Binary(t), "job", "replay", "--data-dir", dataDir, id).CombinedOutput(); err != nil {
			t.Errorf("snapnode job replay %s: %v\n%s\nline %s", id, err, out, line)
		}
	}
	t.Logf("replayed %d jobs", n)
}

// chaosAuditTrails fails the test unless the audit log tells each
// action of the tasks to its end: every action's last entry ends it
// (promoted, completed, failed, denied, rejected) once, or holds it
// (held) while its task, state[task], waits for an operator
// (input_required); none ends twice. A kill must leave no action whose
// story stops half-way, nor one told twice.
func chaosAuditTrails(t *testing.T, db *sqldb.DB, state map[string]string) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.R.QueryContext(ctx, `SELECT task, action, step FROM audit_log WHERE task <> '' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type trail struct {
		task  string
		steps []string
	}
	trails := map[string]*trail{}
	var order []string
	for rows.Next() {
		var task, action, step string
		if err := rows.Scan(&task, &action, &step); err != nil {
			t.Fatal(err)
		}
		tr := trails[action]
		if tr == nil {
			tr = &trail{task: task}
			trails[action] = tr
			order = append(order, action)
		}
		tr.steps = append(tr.steps, step)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	ends := map[string]bool{"promoted": true, "completed": true, "failed": true, "denied": true, "rejected": true}
	for _, action := range order {
		tr := trails[action]
		st, known := state[tr.task]
		if !known {
			continue
		}
		n := 0
		for _, s := range tr.steps {
			if ends[s] {
				n++
			}
		}
		last := tr.steps[len(tr.steps)-1]
		switch {
		case n > 1:
			t.Errorf("task %s (%s), action %s: the audit log ends it %d times: %v", tr.task, st, action, n, tr.steps)
		case last == "held" && st != "input_required":
			t.Errorf("task %s (%s), action %s: held for an operator in the audit log, yet its task does not wait: %v", tr.task, st, action, tr.steps)
		case last != "held" && !ends[last]:
			t.Errorf("task %s (%s), action %s: its audit trail stops half-way: %v", tr.task, st, action, tr.steps)
		}
	}
}
