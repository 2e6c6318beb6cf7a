package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/admin"
)

// resumeHandler is an admin socket's handler that answers job-resume
// only, recording what it was asked.
type resumeHandler struct{ got chan [2]string }

func (h resumeHandler) ResumeJob(_ context.Context, task, checkpoint string) (any, error) {
	h.got <- [2]string{task, checkpoint}
	return map[string]any{"task": task, "checkpoint": checkpoint, "rolled_back": []string{"act-2"}}, nil
}

var errOnlyResume = errors.New("not this test's")

func (resumeHandler) Held(context.Context, string, string, int, bool) (any, error) {
	return nil, errOnlyResume
}
func (resumeHandler) Decide(context.Context, string, string, bool, string, string) (any, error) {
	return nil, errOnlyResume
}
func (resumeHandler) Rollback(context.Context, string) (any, error) { return nil, errOnlyResume }
func (resumeHandler) ConsoleURL(context.Context, int) (any, error)  { return nil, errOnlyResume }

// `snapnode job resume` asks for the checkpoint, and names the missing
// node when none runs on the data folder.
func TestJobResumeCommand(t *testing.T) {
	cmd := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		return code, errOut.String()
	}
	dir := filepath.Join(t.TempDir(), "data")
	if code, errOut := cmd("job", "resume", "--data-dir", dir, "task-1"); code != exitUsage || !strings.Contains(errOut, "--from") {
		t.Fatalf("without --from: exit %d: %s", code, errOut)
	}
	if code, errOut := cmd("job", "resume", "--from", "work-complete-1", "--data-dir", dir); code != exitUsage || !strings.Contains(errOut, "task ID") {
		t.Fatalf("without the ID: exit %d: %s", code, errOut)
	}
	if code, errOut := cmd("job", "resume", "--from", "work-complete-1", "--data-dir", dir, "task-1"); code != exitFail || !strings.Contains(errOut, "is the node running") {
		t.Fatalf("no node: exit %d: %s", code, errOut)
	}
	// A node's admin socket gets the task and the checkpoint; its answer
	// is printed.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h := resumeHandler{got: make(chan [2]string, 1)}
	srv, err := admin.Listen(admin.Path(dir), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	var out, errOut bytes.Buffer
	if code := run([]string{"job", "resume", "--from", "work-complete-1", "--data-dir", dir, "task-1"}, strings.NewReader(""), &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), `"rolled_back":["act-2"]`) {
		t.Fatalf("resume: exit %d: %s%s", code, out.String(), errOut.String())
	}
	if got := <-h.got; got != [2]string{"task-1", "work-complete-1"} {
		t.Fatalf("the node was asked %v", got)
	}
}
