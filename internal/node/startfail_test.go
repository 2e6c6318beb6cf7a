package node_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
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
