package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// TestConsoleURL: console-url asks the running node for a one-time login
// link to its console; the link logs a browser in once; without a node it
// says so.
func TestConsoleURL(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if r := runCLI(t, "", "console-url", "--data-dir", dataDir); r.code != exitFail || !strings.Contains(r.stderr, "is the node running") {
		t.Fatalf("console-url with no node: %s", r)
	}
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })

	r := runCLI(t, "", "console-url", "--data-dir", dataDir)
	link := strings.TrimSpace(r.stdout)
	if r.code != exitOK || !strings.HasPrefix(link, n.HTTPURL()+"/console/login?token=") || strings.Contains(link, "\n") {
		t.Fatalf("console-url: %s", r)
	}
	if !strings.Contains(r.stderr, "works once") {
		t.Errorf("console-url's note: %q", r.stderr)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		resp, err := client.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("use %d of the link: %d, want %d", i+1, resp.StatusCode, want)
		}
		// The page of a used link names the command for this node, with
		// its --data-dir: the bare one finds no node here.
		if want := "snapnode console-url --data-dir " + dataDir; i == 1 && !strings.Contains(string(body), want) {
			t.Errorf("the refused link's page does not say %q:\n%s", want, body)
		}
	}
	resp, err := http.Get(n.HTTPURL() + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "run: snapnode console-url --data-dir " + dataDir + " — "; resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), want) {
		t.Errorf("login needed: %d, want 401 saying %q:\n%s", resp.StatusCode, want, body)
	}
}

// TestAdminCommandsConfigError: a setting that does not load is reported
// alike by every command that calls the admin socket: one line naming the
// setting, exit 2, no synopsis (it is not a mistake in the command line).
func TestAdminCommandsConfigError(t *testing.T) {
	t.Setenv("SNAPNODE_CONFIG", "")
	wrongValue := writeFile(t, t.TempDir(), "value.toml", "log_level = \"loud\"\n", 0o600)
	for _, args := range [][]string{{"console-url"}, {"held"}, {"approve", "t1"}, {"deny", "t1"}, {"rollback", "a1"}} {
		r := runCLI(t, "", append(args, "--config", wrongValue)...)
		want := "snapnode " + args[0] + ": config: log_level \"loud\": want debug, info, warn or error\n"
		if r.code != exitUsage || r.stderr != want {
			t.Errorf("%s with a bad setting: want exit 2 and stderr %q, got %s", args[0], want, r)
		}
	}
}
