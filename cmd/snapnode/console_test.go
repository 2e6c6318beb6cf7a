package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
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
		want := "snapnode " + args[0] + ": config: " + wrongValue + ":1:1: log_level \"loud\": want debug, info, warn or error\n"
		if r.code != exitUsage || r.stderr != want {
			t.Errorf("%s with a bad setting: want exit 2 and stderr %q, got %s", args[0], want, r)
		}
	}
}

// TestConsoleURLUser: console-url asks for a link for the user who runs
// it, under sudo for the user who ran sudo (SUDO_UID), for the one
// --user names, or for any client (--user any); on Linux the node spends
// a link only on a connection of its user, and the command says whose.
func TestConsoleURLUser(t *testing.T) {
	for _, c := range []struct{ name, sudo, want string }{
		{"", "", ""}, {"", "1000", "1000"}, {"", "x", ""}, {"any", "1000", "any"},
		{"0", "1000", "0"}, {"root", "", "0"},
	} {
		if got, err := linkUser(c.name, c.sudo); err != nil || got != c.want {
			t.Errorf("linkUser(%q, %q) = %q, %v; want %q", c.name, c.sudo, got, err, c.want)
		}
	}
	if _, err := linkUser("no-such-user-here", ""); err == nil {
		t.Error("linkUser of an unknown user: no error")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the node tells a connection's user on Linux only")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	t.Setenv("SUDO_UID", "")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		args   []string
		sudo   string
		note   string
		status int // of this process's GET
	}{
		{nil, "", fmt.Sprintf("uid %d)", os.Getuid()), http.StatusSeeOther},
		{nil, "65534", "uid 65534)", http.StatusForbidden},
		{[]string{"--user", "65534"}, "", "uid 65534)", http.StatusForbidden},
		{[]string{"--user", "any"}, "65534", "on this machine before", http.StatusSeeOther},
	} {
		t.Setenv("SUDO_UID", c.sudo)
		r := runCLI(t, "", append([]string{"console-url", "--data-dir", dataDir}, c.args...)...)
		if r.code != exitOK || !strings.Contains(r.stderr, c.note) {
			t.Errorf("console-url %v, SUDO_UID=%q: %s; want a note saying %q", c.args, c.sudo, r, c.note)
			continue
		}
		resp, err := client.Get(strings.TrimSpace(r.stdout))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("console-url %v, SUDO_UID=%q: this process's login %d, want %d", c.args, c.sudo, resp.StatusCode, c.status)
		}
	}
}
