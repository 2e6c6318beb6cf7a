package node_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// mainnetAgent and testnetAgent are one key's addresses on each network.
const (
	mainnetAgent = "bc1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqm72e9v"
	testnetAgent = "tb1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqvkuklr"
)

// A node whose executor cannot start (its policy file missing, its sandbox
// a file) returns an error naming what was wrong, and the parts started
// before it stop; it does not panic.
func TestStartFailsCleanlyWhenTheExecutorCannotStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, c *config.Config)
		want   string
	}{
		{"missing policy", func(t *testing.T, c *config.Config) {
			c.Policy = filepath.Join(t.TempDir(), "nope.cedar")
		}, "nope.cedar"},
		{"policy naming an agent of the other network", func(t *testing.T, c *config.Config) {
			// No request to a testnet node comes from a bc1p… address: a
			// forbid naming one would guard nothing.
			c.Testnet = true
			c.Policy = filepath.Join(t.TempDir(), "mainnet.cedar")
			src := "permit (principal, action, resource);\nforbid (principal == Agent::\"" + mainnetAgent + "\", action, resource);\n"
			if err := os.WriteFile(c.Policy, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "mainnet.cedar:2:1: Agent::\"" + mainnetAgent + "\" is a mainnet address, and this node runs on testnet"},
		{"sandbox is a file", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(c.SandboxDir, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir = filepath.Join(t.TempDir(), "data")
			cfg.RelayListen = "127.0.0.1:0"
			cfg.HTTPListen = ""
			tc.mutate(t, &cfg)
			n, err := node.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				n.Wait()
				t.Fatal("the node started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// A data folder that holds a task database but no key file (a restore
// that left identity.key out, a key deleted by mistake) is refused, naming
// both files: the node does not make a new identity that would carry on
// the old one's tasks and audit log under another address.
func TestStartRefusesANewIdentityOverOldTasks(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = ""
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := n.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cfg.KeyPath()); err != nil {
		t.Fatal(err)
	}
	n, err = node.Start(context.Background(), cfg, logger)
	if err == nil {
		n.Wait()
		t.Fatal("the node started with a new identity over the old one's tasks")
	}
	if !strings.Contains(err.Error(), cfg.KeyPath()) || !strings.Contains(err.Error(), "tasks.db") {
		t.Errorf("Start = %v, want an error naming the key file and the database", err)
	}
	if _, err := os.Stat(cfg.KeyPath()); !os.IsNotExist(err) {
		t.Errorf("a key file was made: %v", err)
	}
}
