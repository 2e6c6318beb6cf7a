package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testutil"
)

// TestNewUser is the README's promise tried as a new user would: `snapnode
// run` with no configuration starts a node and prints a client command;
// that command, run as printed, gets a verified answer; SIGTERM stops the
// node with status 0.
func TestNewUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	dir := t.TempDir()
	bin := testutil.Binary(t)
	home := filepath.Join(dir, "home")
	env := append(os.Environ(), "SNAPNODE_KEY=", "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "HOME="+home)

	// No configuration but a free port (7447 may be taken on a CI machine).
	node := exec.Command(bin, "run", "--relay-listen", "127.0.0.1:0")
	node.Dir, node.Env = dir, env
	stdout, err := node.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	node.Stderr = &logs
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		node.Process.Kill()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	})
	lines := bufio.NewScanner(stdout)
	var ready, try string
	for lines.Scan() {
		switch l := lines.Text(); {
		case strings.HasPrefix(l, "snapnode ready "):
			ready = l
		case strings.HasPrefix(l, "try: "):
			try = strings.TrimPrefix(l, "try: ")
		}
		if try != "" {
			break
		}
	}
	go func() { exited <- node.Wait() }()
	if !regexp.MustCompile(`^snapnode ready address=bc1p[a-z0-9]{58} nostr=[0-9a-f]{64} relay=ws://127\.0\.0\.1:\d+( http=http://127\.0\.0\.1:7448/snap)?$`).MatchString(ready) {
		t.Fatalf("ready line %q\n%s", ready, logs.String())
	}
	if st, err := os.Stat(filepath.Join(dir, "snapnode-data", "identity.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", st, err)
	}

	// The printed command, as printed: `<binary> send --to … --relay … "hello"`.
	args := regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(try, -1)
	for i, a := range args {
		args[i] = strings.Trim(a, `"`)
	}
	if args[0] != bin {
		t.Fatalf("printed command runs %q, want this binary %q", args[0], bin)
	}
	send := exec.Command(args[0], args[1:]...)
	send.Dir, send.Env = dir, env
	out, err := send.Output()
	if err != nil {
		t.Fatalf("printed command failed: %v\n%s\n%s", err, out, logs.String())
	}
	var resp struct {
		From    string `json:"from"`
		Type    string `json:"type"`
		Payload struct {
			Task struct {
				History []struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"history"`
			} `json:"task"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	if resp.Type != "response" || !strings.Contains(ready, "address="+resp.From) ||
		len(resp.Payload.Task.History) != 1 || resp.Payload.Task.History[0].Parts[0].Text != "hello" {
		t.Fatalf("answer %s", out)
	}

	node.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("node exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("node did not stop after SIGTERM")
	}
}
