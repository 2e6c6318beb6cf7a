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

// A workspace that holds one of the node's own files — the data folder
// (identity.key, tasks.db), the key file, the settings file, a secret
// file — is refused at the start, naming both: any peer may READ_FILE
// under the default policy, and /sandbox/identity.key would hand it the
// node's secret key. The check sees through symbolic links.
func TestStartRefusesSandboxHoldingTheNodesFiles(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, c *config.Config)
		want   func(c *config.Config) string // a path the error names
	}{
		{"sandbox is the data folder", func(t *testing.T, c *config.Config) {
			c.SandboxDir = c.DataDir
		}, func(c *config.Config) string { return c.DataDir }},
		{"sandbox holds the data folder", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Dir(c.DataDir)
		}, func(c *config.Config) string { return c.DataDir }},
		{"sandbox is a link to the data folder", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Join(t.TempDir(), "ws")
			if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(c.DataDir, c.SandboxDir); err != nil {
				t.Fatal(err)
			}
		}, func(c *config.Config) string { return c.DataDir }},
		{"key file in the sandbox", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Join(t.TempDir(), "ws")
			c.KeyFile = filepath.Join(c.SandboxDir, "keys", "node.key")
			if err := os.MkdirAll(filepath.Dir(c.KeyFile), 0o700); err != nil {
				t.Fatal(err)
			}
			k, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			if err := identity.SaveKeyFile(c.KeyFile, k); err != nil {
				t.Fatal(err)
			}
		}, func(c *config.Config) string { return c.KeyFile }},
		{"settings file in the sandbox", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Join(t.TempDir(), "ws")
			c.ConfigFile = filepath.Join(c.SandboxDir, "snapnode.toml")
			if err := os.MkdirAll(c.SandboxDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.ConfigFile, []byte("# settings\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(c *config.Config) string { return c.ConfigFile }},
		{"database in the sandbox", func(t *testing.T, c *config.Config) {
			c.SandboxDir = filepath.Join(t.TempDir(), "ws")
			c.Database = filepath.Join(c.SandboxDir, "tasks.db")
		}, func(c *config.Config) string { return c.Database }},
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
				t.Fatal("the node started with its own files in the workspace")
			}
			if !strings.Contains(err.Error(), "sandbox") || !strings.Contains(err.Error(), tc.want(&cfg)) {
				t.Fatalf("Start = %v, want an error naming the sandbox and %s", err, tc.want(&cfg))
			}
		})
	}
}
