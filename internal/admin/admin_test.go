package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
)

type handler struct{ calls []string }

func (h *handler) Decide(_ context.Context, task, action string, approve bool, reason, _ string) (any, error) {
	if !approve {
		h.calls = append(h.calls, "deny "+task+" "+reason)
		return map[string]string{"task": task, "state": "failed"}, nil
	}
	h.calls = append(h.calls, "approve "+task+" "+action)
	if task == "missing" {
		return nil, errors.New("no action waits for confirmation in task missing")
	}
	return map[string]string{"task": task, "state": "completed"}, nil
}

func (h *handler) Held(_ context.Context, task, _ string, _ int, _ bool) (any, error) {
	h.calls = append(h.calls, "held "+task)
	return []map[string]string{{"task": "t1", "action": "a1"}, {"task": "t1", "action": "a2"}}, nil
}

func (h *handler) Rollback(_ context.Context, action string) (any, error) {
	h.calls = append(h.calls, "rollback "+action)
	if action == "large" {
		// A result past the request's bound: a task with a large diff.
		return map[string]string{"action": action, "diff": strings.Repeat("-a line of the old file\n", 3<<20/24)}, nil
	}
	return map[string]string{"action": action}, nil
}

func (h *handler) ResumeJob(_ context.Context, task, checkpoint string) (any, error) {
	h.calls = append(h.calls, "job-resume "+task+" "+checkpoint)
	return map[string]string{"task": task}, nil
}

func (h *handler) ConsoleURL(_ context.Context, user int) (any, error) {
	h.calls = append(h.calls, fmt.Sprintf("console-url %d", user))
	return map[string]string{"url": "http://127.0.0.1:7448/console/login?token=t"}, nil
}

// private is a new folder only its owner may open, as the node's data
// folder is.
func private(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAdminSocket(t *testing.T) {
	dir := private(t)
	path := admin.Path(dir)
	h := &handler{}
	srv, err := admin.Listen(path, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	// A second node on the same folder is refused.
	if _, err := admin.Listen(path, h, nil); err == nil || !strings.Contains(err.Error(), "another node") {
		t.Fatalf("second Listen: %v", err)
	}

	res, err := admin.Call(ctx, path, admin.Request{Op: "held", Task: "t1"})
	var held []map[string]string
	if err != nil || json.Unmarshal(res, &held) != nil || len(held) != 2 || held[1]["action"] != "a2" {
		t.Fatalf("held: %s %v", res, err)
	}
	if _, err := admin.Call(ctx, path, admin.Request{Op: "approve"}); err == nil || !strings.Contains(err.Error(), "task id is required") {
		t.Fatalf("approve without a task: %v", err)
	}
	res, err = admin.Call(ctx, path, admin.Request{Op: "approve", Task: "t1", Action: "a2"})
	var got map[string]string
	if err != nil || json.Unmarshal(res, &got) != nil || got["state"] != "completed" {
		t.Fatalf("approve: %s %v", res, err)
	}
	if _, err := admin.Call(ctx, path, admin.Request{Op: "approve", Task: "missing"}); err == nil || !strings.Contains(err.Error(), "no action waits") {
		t.Fatalf("approve of nothing: %v", err)
	}
	if _, err := admin.Call(ctx, path, admin.Request{Op: "deny", Task: "t2", Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Call(ctx, path, admin.Request{Op: "rollback", Action: "a1"}); err != nil {
		t.Fatal(err)
	}
	if res, err := admin.Call(ctx, path, admin.Request{Op: "console-url"}); err != nil || !strings.Contains(string(res), "/console/login?token=") {
		t.Fatalf("console-url: %s %v", res, err)
	}
	// The link is for the user it names, or any; by default for the
	// socket's client, as the node can tell it.
	for _, user := range []string{"any", "1000"} {
		if _, err := admin.Call(ctx, path, admin.Request{Op: "console-url", User: user}); err != nil {
			t.Fatalf("console-url for %s: %v", user, err)
		}
	}
	for _, user := range []string{"nobody", "-1", "1.5"} {
		if _, err := admin.Call(ctx, path, admin.Request{Op: "console-url", User: user}); err == nil || !strings.Contains(err.Error(), "neither a uid") {
			t.Fatalf("console-url for %s: %v, want it refused", user, err)
		}
	}
	if _, err := admin.Call(ctx, path, admin.Request{Op: "format-disk"}); err == nil || !strings.Contains(err.Error(), "unknown op") {
		t.Fatalf("unknown op: %v", err)
	}
	self := os.Getuid()
	if runtime.GOOS != "linux" {
		self = admin.AnyUser
	}
	want := fmt.Sprintf("held t1|approve t1 a2|approve missing |deny t2 not now|rollback a1|console-url %d|console-url -1|console-url 1000", self)
	if strings.Join(h.calls, "|") != want {
		t.Fatalf("calls %q, want %q", h.calls, want)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Serve: %v", err)
	}
	if _, err := admin.Call(context.Background(), path, admin.Request{Op: "approve", Task: "t1"}); err == nil || !strings.Contains(err.Error(), "is the node running with the data folder "+dir+"?") || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("call without a node: %v", err)
	}
	// A stale socket file (a node that died) is replaced.
	if err := os.WriteFile(filepath.Join(dir, admin.SocketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv2, err := admin.Listen(path, h, nil)
	if err != nil {
		t.Fatalf("Listen over a stale file: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- srv2.Serve(ctx2) }()
	if _, err := admin.Call(ctx2, path, admin.Request{Op: "rollback", Action: "a2"}); err != nil {
		t.Fatalf("call to the new server: %v", err)
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}

// A result larger than a request may be (a task with its diffs) is
// answered whole; a socket in a folder other users can open is refused.
func TestAdminLargeResultAndPrivateFolder(t *testing.T) {
	dir := private(t)
	path := admin.Path(dir)
	srv, err := admin.Listen(path, &handler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	res, err := admin.Call(ctx, path, admin.Request{Op: "rollback", Action: "large"})
	var got map[string]string
	if err != nil || json.Unmarshal(res, &got) != nil || len(got["diff"]) < 3<<20-24 {
		t.Fatalf("large result: %d bytes, %v", len(res), err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Listen(admin.Path(open), &handler{}, nil); err == nil || !strings.Contains(err.Error(), "open to other users (0755)") {
		t.Fatalf("Listen in a folder open to others: %v", err)
	}
}

// slowHandler's approvals take longer than the socket waits on a client.
type slowHandler struct {
	handler
	took time.Duration
}

func (h *slowHandler) Decide(ctx context.Context, task, action string, approve bool, reason, diff string) (any, error) {
	<-time.After(h.took) // the action runs: a command may outlast the socket's I/O timeout
	return h.handler.Decide(ctx, task, action, approve, reason, diff)
}

// A command that takes longer than the socket waits on its client to send
// a request (an approval whose action runs long) still gets its answer
// back to a client that waits for it; before, the connection's deadline,
// set when it was accepted, had passed, and the answer of a carried-out
// approval was lost.
func TestAdminSlowCommandIsAnswered(t *testing.T) {
	dir := private(t)
	path := admin.Path(dir)
	const timeout = 50 * time.Millisecond
	srv, err := admin.Listen(path, &slowHandler{took: 4 * timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetIOTimeout(srv, timeout)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	res, err := admin.Call(ctx, path, admin.Request{Op: "approve", Task: "t1", Action: "a1"})
	var got map[string]string
	if err != nil || json.Unmarshal(res, &got) != nil || got["state"] != "completed" {
		t.Fatalf("approve that outlasts the socket's timeout: %s %v", res, err)
	}
	// A client that stops waiting first is told the command may still
	// be carried out.
	short, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	if _, err := admin.Call(short, path, admin.Request{Op: "approve", Task: "t1", Action: "a1"}); !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "may still carry the command out") {
		t.Fatalf("approve the client stopped waiting for: %v", err)
	}
}

// A socket path longer than a Unix socket's address holds (107 bytes on
// Linux, 103 on BSD and macOS) is refused by Listen and by Call with an
// error naming the rule and what to change, not the system's "bind:
// invalid argument"; a data folder deep in a home directory reaches it.
func TestAdminSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(private(t), strings.Repeat("d", 120))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := admin.Path(dir)
	_, err := admin.Listen(path, &handler{}, nil)
	if err == nil {
		t.Fatal("Listen took a path longer than a socket's address holds")
	}
	for _, want := range []string{path, "bytes", "shorter data folder"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Listen: error %q does not name %q", err, want)
		}
	}
	_, err = admin.Call(context.Background(), path, admin.Request{Op: "held"})
	if err == nil || !strings.Contains(err.Error(), "shorter data folder") {
		t.Errorf("Call: error %v does not name the rule", err)
	}
}

// A request over MaxMessage is refused with an error that says so: by
// Call before it is sent (a deny whose --reason is a file's worth), and by
// the server to a client that sends one anyway, which before read the
// first MaxMessage bytes and answered "the request is not JSON:
// unexpected end of JSON input". Nothing is carried out.
func TestAdminOversizeRequest(t *testing.T) {
	dir := private(t)
	path := admin.Path(dir)
	h := &handler{}
	srv, err := admin.Listen(path, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	big := strings.Repeat("x", admin.MaxMessage)
	_, err = admin.Call(ctx, path, admin.Request{Op: "deny", Task: "t1", Reason: big})
	if err == nil || !strings.Contains(err.Error(), "over the socket's 1048576") {
		t.Errorf("Call of an oversize request: %v", err)
	}

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := []byte(`{"op":"deny","task":"t1","reason":"` + big + `"}` + "\n")
	go c.Write(req) // the server stops reading at its bound: the rest may never be taken
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var resp admin.Response
	if err != nil || json.Unmarshal(line, &resp) != nil || !strings.Contains(resp.Error, "over the socket's 1048576") {
		t.Errorf("an oversize request sent raw: %q %v", line, err)
	}
	if len(h.calls) != 0 {
		t.Errorf("carried out: %q", h.calls)
	}
}

// Each command is one log line naming what it was given, and its error
// when it failed: no task="" on a listing of every task's actions, no
// err=<nil> on a command that worked.
func TestAdminLogLine(t *testing.T) {
	path := admin.Path(private(t))
	var logs strings.Builder
	srv, err := admin.Listen(path, &handler{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	for _, req := range []admin.Request{{Op: "held"}, {Op: "approve", Task: "t1", Action: "a2"}, {Op: "approve", Task: "missing"}} {
		admin.Call(ctx, path, req)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := [][]string{
		{`msg="admin command" op=held`},
		{`msg="admin command" op=approve task=t1 action=a2`},
		{`msg="admin command failed" op=approve task=missing`, `err="no action waits`},
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got:\n%s", len(want), logs.String())
	}
	for i, line := range lines {
		for _, w := range want[i] {
			if !strings.Contains(line, w) {
				t.Errorf("line %d: no %q in %s", i, w, line)
			}
		}
		for _, bad := range []string{`=""`, "<nil>"} {
			if strings.Contains(line, bad) {
				t.Errorf("line %d: %q in %s", i, bad, line)
			}
		}
	}
}
