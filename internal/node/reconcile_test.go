package node_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// The environment of the child process TestInterruptedNodeChild runs: its
// data folder and the point of a proposal's run it stops at.
const (
	childDataEnv  = "SNAPNODE_TEST_CHILD_DATA"
	childPauseEnv = "SNAPNODE_TEST_CHILD_PAUSE"
	childDBEnv    = "SNAPNODE_TEST_CHILD_DATABASE" // "": SQLite in the data folder
)

// TestInterruptedNodeChild is the node process of the crash tests below,
// not a test: started by them as a child, it runs a node on its data
// folder with HTTP on a free port, prints its ready line, and, when the
// pause point is set, prints "paused POINT" there and waits for the
// SIGKILL.
func TestInterruptedNodeChild(t *testing.T) {
	dataDir := os.Getenv(childDataEnv)
	if dataDir == "" {
		t.Skip("the child process of TestReconcileAfterSIGKILL")
	}
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	cfg.Database = os.Getenv(childDBEnv)
	var opts []node.Option
	if at := os.Getenv(childPauseEnv); at != "" {
		opts = append(opts, node.WithPause(func(point string) {
			if point == at {
				fmt.Printf("paused %s\n", point)
				select {} // until SIGKILL
			}
		}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), opts...)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ready address=%s http=%s\n", n.Address(), n.HTTPURL())
	select {} // until killed
}

// childNode is a node in a child process.
type childNode struct {
	*testutil.Child
	addr string
	url  string
}

// startChildNode starts TestInterruptedNodeChild on dataDir, pausing at
// pause ("" for never).
func startChildNode(t *testing.T, dataDir, pause string) *childNode {
	t.Helper()
	return startChildNodeOn(t, dataDir, "", pause)
}

// startChildNodeOn is startChildNode with the database dsn ("" for
// SQLite in dataDir).
func startChildNodeOn(t *testing.T, dataDir, dsn, pause string) *childNode {
	t.Helper()
	c := &childNode{Child: testutil.StartChild(t, "TestInterruptedNodeChild", childDataEnv+"="+dataDir, childPauseEnv+"="+pause, childDBEnv+"="+dsn)}
	line, err := c.Lines.ReadString('\n')
	m := regexp.MustCompile(`^ready address=(\S+) http=(\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("child node: no ready line: %q, %v", line, err)
	}
	c.addr, c.url = m[1], m[2]+"/snap"
	return c
}

// kill waits for the child to report it paused at point, then SIGKILLs
// it. The request that should get there is answered on sent: an answer
// before the pause fails the test.
func (c *childNode) kill(t *testing.T, point string, sent <-chan error) {
	t.Helper()
	paused := make(chan string, 1)
	go func() {
		line, _ := c.Lines.ReadString('\n')
		paused <- line
		io.Copy(io.Discard, c.Lines)
	}()
	select {
	case line := <-paused:
		if line != "paused "+point+"\n" {
			t.Fatalf("child node: %q; want it paused at %s", line, point)
		}
	case err := <-sent:
		t.Fatalf("the request was answered (%v) before the node paused at %s", err, point)
	case <-time.After(time.Minute):
		t.Fatalf("the node did not pause at %s", point)
	}
	c.Kill(t)
	c.WaitKilled(t)
}

// A node is killed with SIGKILL in the middle of a WRITE_FILE proposal's
// run, at each point where a task used to be left working for ever:
// after the task was stored but before the proposal ran, and after the
// executor promoted the write but before the task was updated. Restarted
// on the same data folder, the node ends the task before it serves: the
// requester's retry of the very same message gets the task, completed
// with its artifacts, and the write was applied exactly once. On a
// PostgreSQL database that replicas may share, a task this young is left
// to the process that may be working on it: the retry gets it as it is,
// working, and nothing is applied a second time.
func TestReconcileAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	for _, tc := range []struct {
		name, point string
		written     bool // the write was applied before the kill
		postgres    bool
		want        string // the task's state after the restart
	}{
		{name: "run", point: "run", written: false, want: "completed"},
		{name: "ran", point: "ran", written: true, want: "completed"},
		{name: "ran on PostgreSQL", point: "ran", written: true, postgres: true, want: "working"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			dsn := ""
			if tc.postgres {
				dsn = testdb.Postgres(t)
			}
			first := startChildNodeOn(t, dataDir, dsn, tc.point)
			k, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			client := newHTTPClientWith(t, k)
			body, _ := json.Marshal(proposal("WRITE_FILE", map[string]any{"path": "/sandbox/once.md", "content": "once\n"}))
			req := &snap.Message{To: first.addr, Method: "message/send", Payload: body}
			lost := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := client.Send(ctx, first.url, req)
				lost <- err
			}()
			first.kill(t, tc.point, lost)
			if err := <-lost; err == nil {
				t.Fatal("the request was answered although the node was killed before it could answer")
			}
			file := filepath.Join(dataDir, "sandbox", "once.md")
			if _, err := os.Stat(file); (err == nil) != tc.written {
				t.Fatalf("before the restart: once.md exists = %v, want %v", err == nil, tc.written)
			}

			second := startChildNodeOn(t, dataDir, dsn, "")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := client.Send(ctx, second.url, req) // the same signed message: a retry
			if err != nil {
				t.Fatalf("retry after the restart: %v", err)
			}
			var p map[string]any
			if err := json.Unmarshal(resp.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p["error"] != nil {
				t.Fatalf("retry after the restart answered %v; want the task", p["error"])
			}
			v := taskOf(t, p)
			if v.Status.State != tc.want || p["deduplicated"] != true {
				t.Fatalf("retry: task %s %s %q, deduplicated %v; want %s, deduplicated", v.ID, v.Status.State, v.Status.Message, p["deduplicated"], tc.want)
			}
			if tc.want == "completed" {
				if diff, _, ok := v.artifact("diff-"); !ok || !regexp.MustCompile(`\+once`).MatchString(diff) {
					t.Errorf("retry: the task's diff artifact is %q (present %v); want the write's", diff, ok)
				}
				if _, _, ok := v.artifact("result-"); !ok {
					t.Errorf("retry: the task has no result artifact: %+v", v.Artifacts)
				}
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != "once\n" {
				t.Fatalf("after the restart: once.md = %q, %v", b, err)
			}

			if dsn == "" {
				dsn = "sqlite:" + filepath.Join(dataDir, "tasks.db")
			}
			db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var writes, promoted int
			if err := db.R.QueryRowContext(ctx, db.Dialect.Rebind(`SELECT COUNT(*) FROM executor_actions WHERE task = ? AND action = 'WRITE_FILE'`), v.ID).Scan(&writes); err != nil && err != sql.ErrNoRows {
				t.Fatal(err)
			}
			if err := db.R.QueryRowContext(ctx, db.Dialect.Rebind(`SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`), v.ID).Scan(&promoted); err != nil {
				t.Fatal(err)
			}
			if writes != 1 || promoted != 1 {
				t.Fatalf("%d WRITE_FILE actions recorded and %d promotions audited for the task; want 1 and 1", writes, promoted)
			}
		})
	}
}

// A node is killed with SIGKILL after it carried out the operator's
// approval of a held DELETE_FILE but before the task, waiting for that
// decision, was updated. Restarted, the node gives the task the action's
// outcome (completed, with the diff) before it serves, and the delete was
// carried out once.
func TestReconcileDecidedAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir, held, call := deleteKilledAfterApproval(t)

	second := startChildNode(t, dataDir, "")
	v := call(second, "tasks/get", map[string]any{"taskId": held.ID})
	if v.Status.State != "completed" {
		t.Fatalf("after the restart the task is %s %q; want completed", v.Status.State, v.Status.Message)
	}
	if diff, _, ok := v.artifact("diff-"); !ok || !regexp.MustCompile(`-bye`).MatchString(diff) {
		t.Errorf("the task's diff artifact is %q (present %v); want the delete's", diff, ok)
	}
	db, err := sqldb.Open(context.Background(), "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var promoted int
	if err := db.R.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`, held.ID).Scan(&promoted); err != nil {
		t.Fatal(err)
	}
	if promoted != 1 {
		t.Fatalf("%d promotions audited for the task; want 1", promoted)
	}
}

// deleteKilledAfterApproval starts a node as a child process on a new data
// folder whose sandbox holds gone.md, has a peer propose DELETE_FILE of
// it (held for the operator), approves it through the admin socket and
// kills the node with SIGKILL at the "decided" point, once the delete was
// carried out. It returns the data folder, the held task and a call that
// sends the peer's requests to a node over HTTP.
func deleteKilledAfterApproval(t *testing.T) (dataDir string, held taskView, call func(c *childNode, method string, payload any) taskView) {
	t.Helper()
	dataDir = filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dataDir, "sandbox", "gone.md")
	if err := os.WriteFile(file, []byte("bye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startChildNode(t, dataDir, "decided")
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	client := newHTTPClientWith(t, k)
	call = func(c *childNode, method string, payload any) taskView {
		t.Helper()
		body, _ := json.Marshal(payload)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := client.Send(ctx, c.url, &snap.Message{To: c.addr, Method: method, Payload: body})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var p map[string]any
		if err := json.Unmarshal(resp.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return taskOf(t, p)
	}
	held = call(first, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"}))
	if held.Status.State != "input_required" {
		t.Fatalf("the delete is %s %q; want it held for the operator", held.Status.State, held.Status.Message)
	}
	approved := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "approve", Task: held.ID})
		approved <- err
	}()
	first.kill(t, "decided", approved)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("before the restart: gone.md %v; want it deleted by the approval", err)
	}
	return dataDir, held, call
}
