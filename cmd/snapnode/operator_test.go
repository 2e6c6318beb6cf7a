package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/snapnode/snapnode/tasks/taskstest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

func TestTaskListAndShow(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dataDir, 0o700)
	st, err := sqlstore.Open(ctx, filepath.Join(dataDir, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc := tasks.NewService(st, tasks.ServiceOptions{})
	const alice = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	const bob = "bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"
	msg := func(s string) []byte {
		return []byte(`{"message":{"messageId":"` + s + `","role":"user","parts":[{"text":"` + s + `"}]}}`)
	}
	a1, _ := taskstest.Send(ctx, svc, alice, msg("a1"))
	if _, err := taskstest.Send(ctx, svc, bob, msg("b1")); err != nil {
		t.Fatal(err)
	}
	if _, err := taskstest.Cancel(ctx, svc, alice, []byte(`{"taskId":"`+a1.ID+`"}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	runTask := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"task"}, args...), strings.NewReader(""), &out, &errOut)
		if code != 0 {
			t.Logf("stderr: %s", errOut.String())
		}
		return out.String(), code
	}
	out, code := runTask("list", "--data-dir", dataDir)
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("task list: exit %d\n%s", code, out)
	}
	out, _ = runTask("list", "--data-dir", dataDir, "--from", alice, "--state", "canceled")
	var line struct {
		Owner string `json:"owner"`
		Task  struct {
			ID      string `json:"id"`
			History []any  `json:"history"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(out), &line); err != nil || line.Owner != alice || line.Task.ID != a1.ID || line.Task.History != nil {
		t.Fatalf("task list --from --state: %q (%v)", out, err)
	}
	out, code = runTask("show", "--data-dir", dataDir, a1.ID)
	var shown struct {
		Task struct {
			History []any `json:"history"`
		} `json:"task"`
		Events []struct {
			Version int64 `json:"version"`
			Kind    string
			Status  struct{ State string }
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || len(shown.Task.History) != 1 {
		t.Fatalf("task show: exit %d %q", code, out)
	}
	if len(shown.Events) != 2 || shown.Events[0].Status.State != "submitted" || shown.Events[1].Status.State != "canceled" ||
		shown.Events[1].Version != 2 {
		t.Fatalf("task show events: %+v", shown.Events)
	}
	if _, code := runTask("show", "--data-dir", dataDir, "nope"); code != exitFail {
		t.Errorf("task show of an unknown id: exit %d, want %d", code, exitFail)
	}
	if _, code := runTask("list", "--data-dir", dataDir, "--state", "sleeping"); code != exitUsage {
		t.Errorf("unknown state: exit %d, want %d", code, exitUsage)
	}
}
