package node_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

// TestJSONLog runs a real node with log_format json at debug level, its
// agent asking a model server with an API key, and has it answer a
// proposal that waits for an operator, a free-text task the agent
// completes and a message it refuses. Every line of its log must validate
// against schemas/log-line.v1.json; the lines an operator relies on must
// be there; and no secret (the node's key, the requester's, the model
// server's API key) may appear anywhere, even at debug level.
func TestJSONLog(t *testing.T) {
	const apiKey = "sk-test-4f9c1e7d2b8a6053e1c9f7a2d4b6e8c0"
	t.Setenv("SNAPNODE_LLM_API_KEY", apiKey)
	srv := llmtest.New(t)
	dir := t.TempDir()
	nodeKey, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "node.key")
	if err := identity.SaveKeyFile(keyFile, nodeKey); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.KeyFile = keyFile
	cfg.Database = testdb.SQLite(t)
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.LogFormat, cfg.LogLevel = "json", "debug"
	// A password in the model server's URL is a credential too.
	const urlPassword = "pw-7e2c9a41d5b3f086"
	cfg.Agent.LLMURL = strings.Replace(srv.URL(), "http://", "http://snapnode:"+urlPassword+"@", 1)
	cfg.Agent.LLMModel = llmtest.DefaultModel
	var logs testutil.LockedBuffer
	n, stop := startConfigured(t, cfg, cfg.Logger(&logs, nil))
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"old.txt", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "sandbox", f), []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := &agentNode{Node: n, llm: srv, alice: newRequester(t, n.RelayURLs()), dataDir: cfg.DataDir}

	held := taskOf(t, a.alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/old.txt"}), false))
	if held.Status.State != "input_required" {
		t.Fatalf("the deletion: %s %q", held.Status.State, held.Status.Message)
	}
	srv.Push(finish("nothing to do"))
	id := a.send(t, "", "say hello")
	if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateCompleted {
		t.Fatalf("the agent's task: %s %q", got.Status.State, got.Status.Message)
	}
	// The agent proposes an action that waits for an operator too.
	srv.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/keep.txt"})))
	agentHeld := a.send(t, "", "delete keep.txt")
	if got := a.wait(t, agentHeld, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("the agent's deletion: %s %q", got.Status.State, got.Status.Message)
	}
	// Another identity asks for alice's task over HTTP: refused (1001).
	if p := httpCall(t, newHTTPClient(t).Send, n.HTTPURL()+"/snap", n, "tasks/get", map[string]any{"taskId": held.ID}); errCode(p) == 0 {
		t.Fatalf("another identity read the task: %v", p)
	}
	if h := srv.Requests(); len(h) == 0 || h[0].Header.Get("Authorization") != "Bearer "+apiKey {
		t.Fatal("the model server was not asked with the API key: the test would prove nothing about it")
	}
	stop()

	out := logs.String()
	for name, secret := range map[string]string{
		"the node's secret key":           nodeKey.Hex(),
		"the requester's secret key":      a.alice.key.Hex(),
		"the model server's API key":      apiKey,
		"the API key's tail":              apiKey[len(apiKey)-16:],
		"the model server URL's password": urlPassword,
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s appears in the log", name)
		}
	}
	seen := map[string]map[string]any{}
	heldLines := map[any]int{} // info lines about a held action, by task
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", lines, err, sc.Text())
		}
		if err := schemas.LogLine().Validate(v); err != nil {
			t.Errorf("line %d does not validate against schemas/log-line.v1.json: %v\n%s", lines, err, sc.Text())
		}
		m := v.(map[string]any)
		msg, _ := m["msg"].(string)
		key := msg
		if msg == "request answered" {
			key += " " + m["transport"].(string)
			if m["task"] == held.ID {
				key += " held"
			}
		}
		if m["task"] == agentHeld {
			key += " (agent)"
		}
		seen[key] = m
		if strings.Contains(msg, "held for an operator") && m["level"] != "DEBUG" {
			heldLines[m["task"]]++
		}
	}
	if lines < 10 {
		t.Fatalf("only %d lines logged", lines)
	}
	for _, want := range []string{"request answered nostr held", "action held for an operator", "request refused"} {
		if seen[want] == nil {
			t.Errorf("no %q line in the log:\n%s", want, out)
		}
	}
	if h := seen["action held for an operator"]; h != nil && (h["task"] != held.ID || h["risk"] != "HIGH" || !strings.Contains(h["decide"].(string), "snapnode approve "+held.ID)) {
		t.Errorf("the held action's line: %v", h)
	}
	// One line tells the operator of each held action (the executor's,
	// which names the task, the action, its paths and the command that
	// decides), whoever proposed it.
	for _, task := range []string{held.ID, agentHeld} {
		if heldLines[task] != 1 {
			t.Errorf("%d lines above debug about task %s's held action, want 1:\n%s", heldLines[task], task, out)
		}
	}
	if r := seen["request refused"]; r != nil && r["transport"] != "http" {
		t.Errorf("the refusal's line: %v", r)
	}
}
