package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// hookHandler is a slog.Handler that drops every record, but calls hook
// on the first whose message is msg, on the goroutine that logs it.
type hookHandler struct {
	msg  string
	once *sync.Once
	hook func()
}

func (h hookHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h hookHandler) WithGroup(string) slog.Handler            { return h }
func (h hookHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(h.hook)
	}
	return nil
}

// A reload puts the new operators and the new policy in force together:
// a proposal judged while it runs is judged by the old two or the new
// two, never by the new operators under the old policy. Here the old
// policy permits the operators everything; the reload makes bob an
// operator and the new policy forbids him everything: neither lets him
// act, and neither may their mix. The proposal is run in the middle of
// the reload, when the reload logs the change of http_allowed_origins.
func TestReloadSwapsOperatorsAndPolicyTogether(t *testing.T) {
	dir := t.TempDir()
	aliceKey, _ := identity.Generate()
	bobKey, _ := identity.Generate()
	alice, bob := aliceKey.Address(identity.Mainnet), bobKey.Address(identity.Mainnet)
	write := func(name, src string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	operatorsOnly := `permit (principal in Role::"operator", action, resource);` + "\n"
	oldPolicy := write("old.cedar", operatorsOnly)
	newPolicy := write("new.cedar", operatorsOnly+fmt.Sprintf(`forbid (principal == Agent::%q, action, resource);`+"\n", bob))

	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Operators = []string{alice}
	cfg.Policy = oldPolicy

	list := func(n int) []byte {
		return fmt.Appendf(nil, `{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a%02d","reasoning":"r","action":"LIST_FILES","args":{"path":"/sandbox/"}}`, n)
	}
	var n *node.Node
	var runs int
	// outcome runs a LIST_FILES of requester: "ran" or the code it failed with.
	outcome := func(requester string) string {
		t.Helper()
		runs++
		res, err := n.RunProposal(context.Background(), requester, list(runs))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != executor.Failed {
			return "ran"
		}
		if strings.Contains(string(res.Output), "ACTION_NOT_ALLOWED") {
			return "denied"
		}
		return "failed: " + string(res.Output)
	}
	var during string
	handler := hookHandler{msg: "http_allowed_origins changed", once: new(sync.Once), hook: func() { during = outcome(bob) }}
	n, _ = startConfigured(t, cfg, slog.New(handler))

	if got := outcome(alice); got != "ran" {
		t.Fatalf("alice, an operator, before the reload: %s", got)
	}
	if got := outcome(bob); got != "denied" {
		t.Fatalf("bob, no operator, before the reload: %s", got)
	}
	next := cfg
	next.Operators = []string{alice, bob}
	next.Policy = newPolicy
	next.HTTPAllowedOrigins = []string{"https://console.example"}
	if _, err := n.Reload(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	if during == "" {
		t.Fatal("the reload did not log the change of http_allowed_origins: the proposal was not run during it")
	}
	if during != "denied" {
		t.Errorf("bob during the reload: %s; want denied, by the old operators and policy or the new ones", during)
	}
	if got := outcome(bob); got != "denied" {
		t.Errorf("bob, an operator forbidden everything, after the reload: %s", got)
	}
	if got := outcome(alice); got != "ran" {
		t.Errorf("alice after the reload: %s", got)
	}
}
