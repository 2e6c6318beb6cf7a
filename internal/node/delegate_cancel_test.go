package node_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// syncLog is a log's text, written from any goroutine; seen is closed
// once it holds want.
type syncLog struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	b    strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	if strings.Contains(string(p), l.want) && l.seen != nil {
		close(l.seen)
		l.seen = nil
	}
	return n, err
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Node A delegates its jobs to node B, a real node whose agent's model
// takes a minute to answer. The requester cancels its task on A while B
// works on the step: A's job stops, and A sends B tasks/cancel for the
// task the step made there, so B's job stops too, and A's log says so.
// Before, B's task stayed working, its model asked, for nothing.
func TestDelegatedTaskCanceledWithTheJob(t *testing.T) {
	b := startAgentNode(t, testdb.SQLite(t), nil)
	b.llm.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"late"}`, Delay: time.Minute}
	})

	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Database = testdb.SQLite(t)
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = ""
	cfg.Relays = b.RelayURLs()
	cfg.Agent.Delegate = b.Address()
	cfg.Agent.StepTimeout = config.Duration{Duration: 5 * time.Minute}
	cfg.Agent.Lease = config.Duration{Duration: 2 * time.Second}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	seen := make(chan struct{})
	logged := &syncLog{want: "the job's task on the delegate was canceled", seen: seen}
	n, _ := startConfigured(t, cfg, slog.New(slog.NewTextHandler(logged, nil)))
	a := &agentNode{Node: n, alice: newRequester(t, n.RelayURLs())}
	id := a.send(t, "", "summarise the week")

	// B's model is asked: the step is at work there.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.llm.WaitCalls(ctx, 1); err != nil {
		t.Fatalf("B's model was never asked: %v", err)
	}
	made, err := b.Tasks.List(ctx, tasks.Filter{Owner: n.Address(), Brief: true})
	if err != nil || len(made) != 1 {
		t.Fatalf("B holds %d tasks of A (%v); want 1", len(made), err)
	}
	a.alice.call(t, a.Node, "tasks/cancel", map[string]any{"taskId": id}, false)
	a.wait(t, id, tasks.StateCanceled)

	// B's task is canceled, by A.
	cur, events, err := b.Tasks.Subscribe(ctx, n.Address(), made[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for cur.Status.State != tasks.StateCanceled {
		ev, ok := <-events
		if !ok {
			t.Fatalf("B's task %s stayed %s; want canceled by A", made[0].ID, cur.Status.State)
		}
		if ev.Status != nil {
			cur.Status = *ev.Status
		}
	}
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatalf("A's log does not say it canceled B's task:\n%s", logged.String())
	}
}
