package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/llmtest"
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
