package node_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// Reload puts the live settings in force for the next request — the
// identity limit, the operators, the log level — and names the settings
// that need a restart without applying them; settings that do not check
// change nothing.
func TestReload(t *testing.T) {
	var level slog.LevelVar
	n, _ := startNodeOpts(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.IdentityRate, c.NostrKeyRate = 0, 0
	}, node.WithLogLevel(&level))
	aliceKey, _ := identity.Generate()
	alice := newHTTPClientWith(t, aliceKey)
	endpoint := n.HTTPURL() + "/snap"
	unknown := map[string]any{"taskId": "no-such-task"}
	ask := func() map[string]any { return httpCall(t, alice.Send, endpoint, n, "tasks/get", unknown) }
	for i := range 5 {
		if p := ask(); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d with no identity limit: %v", i+1, p)
		}
	}

	cfg := config.Default()
	cfg.DataDir = "elsewhere" // needs a restart: reported, not applied
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.IdentityRate, cfg.IdentityBurst = 0.001, 2
	cfg.NostrKeyRate = 0
	cfg.LogLevel = "debug"
	cfg.Operators = []string{aliceKey.Address(identity.Mainnet)}
	restart, err := n.Reload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(restart, "data_dir") || slices.ContainsFunc(restart, func(s string) bool {
		return strings.HasPrefix(s, "identity_") || s == "operators" || s == "log_level"
	}) {
		t.Errorf("settings needing a restart: %q; want data_dir and no live one", restart)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after reloading debug", level.Level())
	}
	if !n.Tasks.IsOperator(aliceKey.Address(identity.Mainnet)) {
		t.Error("the operator added is not one")
	}
	for i := range 2 {
		if p := ask(); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d within the new burst: %v", i+1, p)
		}
	}
	if p := ask(); !rateLimited(p, "identity") {
		t.Errorf("over the burst set by Reload: %v", p)
	}

	// A card that does not validate: nothing changes.
	bad := cfg
	bad.IdentityRate = 0
	bad.Operators = nil
	bad.Card.Name = ""
	if _, err := n.Reload(context.Background(), bad); err == nil {
		t.Fatal("a card with no name was accepted")
	}
	if !n.Tasks.IsOperator(aliceKey.Address(identity.Mainnet)) {
		t.Error("a refused reload removed the operator")
	}
	if p := ask(); !rateLimited(p, "identity") {
		t.Errorf("a refused reload lifted the identity limit: %v", p)
	}
	bad = cfg
	bad.Workers = 0
	if _, err := n.Reload(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "workers") {
		t.Errorf("settings that do not validate: %v", err)
	}
}

// A reload to a policy naming an agent of the other network (tb1p… on a
// mainnet node) is refused, naming where, and the policy in force stays;
// one naming the node's own network's address is put in force.
func TestReloadRefusesAPolicyOfTheOtherNetwork(t *testing.T) {
	var cfg config.Config
	n, _ := startNode(t, func(c *config.Config) { cfg = *c })
	forbid := func(agent string) string {
		path := filepath.Join(t.TempDir(), "forbid.cedar")
		src := "permit (principal, action, resource);\nforbid (principal == Agent::\"" + agent + "\", action, resource);\n"
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cfg.Policy = forbid(testnetAgent)
	_, err := n.Reload(context.Background(), cfg)
	if !errors.Is(err, node.ErrNotReloaded) || !strings.Contains(err.Error(), "forbid.cedar:2:1: Agent::\""+testnetAgent+"\" is a testnet address, and this node runs on mainnet") {
		t.Fatalf("reload to a policy naming a testnet agent: %v", err)
	}
	if name, _ := n.PolicyInForce(); name != "default.cedar" {
		t.Fatalf("a refused reload put %q in force", name)
	}
	cfg.Policy = forbid(mainnetAgent)
	if _, err := n.Reload(context.Background(), cfg); err != nil {
		t.Fatalf("reload to a policy naming a mainnet agent: %v", err)
	}
	if name, _ := n.PolicyInForce(); name != cfg.Policy {
		t.Fatalf("after the reload, %q in force; want %q", name, cfg.Policy)
	}
}

// The settings a running node cannot change — its listen addresses, data
// folder, database, key, workspace — are named by Reload and in its
// warning, never applied and never said silently; the warning names a
// DSN by its setting, never showing its password.
func TestReloadNamesSettingsThatNeedARestart(t *testing.T) {
	var log testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	n, _ := startConfigured(t, cfg, slog.New(slog.NewTextHandler(&log, nil)))
	httpURL := n.HTTPURL()

	next := cfg
	next.HTTPListen = "127.0.0.1:1"
	next.RelayListen = "127.0.0.1:2"
	next.MetricsListen = "127.0.0.1:3"
	next.DataDir = filepath.Join(t.TempDir(), "other")
	next.Database = "postgres://snap:hunter2@db.example/snap"
	next.KeyFile = "/elsewhere/identity.key"
	next.SandboxDir = "/elsewhere/sandbox"
	restart, err := n.Reload(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"data_dir", "key_file", "database", "relay_listen", "http_listen", "metrics_listen", "sandbox_dir"}
	for _, name := range want {
		if !slices.Contains(restart, name) {
			t.Errorf("Reload's settings needing a restart %q lack %s", restart, name)
		}
	}
	line := ""
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "need a restart") {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "database") || !strings.Contains(line, "http_listen") {
		t.Errorf("the warning: %q", line)
	}
	if strings.Contains(log.String(), "hunter2") {
		t.Errorf("the log shows the DSN's password:\n%s", log.String())
	}
	if n.HTTPURL() != httpURL {
		t.Errorf("the HTTP transport moved to %s", n.HTTPURL())
	}
	resp, err := http.Get(httpURL + "/healthz")
	if err != nil {
		t.Fatalf("the node stopped answering at its address: %v", err)
	}
	resp.Body.Close()
}
