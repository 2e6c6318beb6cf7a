package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
)

// The node is killed with SIGKILL while 100 requests are in flight. After
// a restart on the same data folder, every task whose creation was
// answered exists, in the state the answer gave (free text on a node
// without an agent: failed at once), with its one history entry, and
// tasks/get answers for it.
func TestCrashWhileRequestsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	n := startNodeProcess(t, dataDir)
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	dialClient := func(url string) (*client.Nostr, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		p := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: slog.New(slog.DiscardHandler)})
		p.Start(ctx)
		return client.NewNostr(client.NostrConfig{Key: k, Relays: p, Logger: slog.New(slog.DiscardHandler)}), func() { cancel(); p.Close() }
	}
	c, closeClient := dialClient(n.ws)
	defer closeClient()

	const inFlight = 100
	var mu sync.Mutex
	type answer struct{ sent, state string }
	answered := map[string]answer{} // task id → the text sent, the state answered
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range inFlight {
		wg.Go(func() {
			<-start
			body, _ := json.Marshal(text(fmt.Sprintf("crash-%d", i)))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := c.Request(ctx, client.Target{Address: n.addr, PubKey: n.pub}, client.NostrRequest{Method: "message/send", Payload: body})
			if err != nil {
				return // killed before it answered: not accepted as far as the requester knows
			}
			var p struct {
				Task struct {
					ID     string `json:"id"`
					Status struct {
						State   string `json:"state"`
						Message string `json:"message"`
					} `json:"status"`
				} `json:"task"`
			}
			if json.Unmarshal(resp.Payload, &p) == nil && p.Task.ID != "" {
				if p.Task.Status.State != "failed" || !strings.Contains(p.Task.Status.Message, "--llm-url") {
					t.Errorf("crash-%d answered in state %s (%q); want failed, naming --llm-url (no agent)", i, p.Task.Status.State, p.Task.Status.Message)
				}
				mu.Lock()
				answered[p.Task.ID] = answer{sent: fmt.Sprintf("crash-%d", i), state: p.Task.Status.State}
				mu.Unlock()
			}
		})
	}
	close(start)
	// Kill as soon as some answers are in, so that others are in flight.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got := len(answered)
		mu.Unlock()
		if got >= 10 {
			break
		}
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	wg.Wait()
	closeClient()
	mu.Lock()
	defer mu.Unlock()
	if len(answered) == 0 || len(answered) == inFlight {
		t.Logf("answered %d of %d before the kill: the kill did not land mid-run", len(answered), inFlight)
	}

	n2 := startNodeProcess(t, dataDir)
	c2, closeClient2 := dialClient(n2.ws)
	defer closeClient2()
	for id, a := range answered {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		body, _ := json.Marshal(map[string]any{"taskId": id})
		resp, err := c2.Request(ctx, client.Target{Address: n2.addr, PubKey: n2.pub}, client.NostrRequest{Method: "tasks/get", Payload: body})
		cancel()
		if err != nil {
			t.Fatalf("tasks/get %s after the crash: %v", id, err)
		}
		var p struct {
			Task *struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
				History []struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"history"`
			} `json:"task"`
		}
		if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Task == nil {
			t.Fatalf("accepted task %s lost in the crash: %s", id, resp.Payload)
		}
		if p.Task.Status.State != a.state || len(p.Task.History) != 1 || p.Task.History[0].Parts[0].Text != a.sent {
			t.Errorf("task %s after the crash: state %s, history %+v; want the answered state %s, history [%s]", id, p.Task.Status.State, p.Task.History, a.state, a.sent)
		}
	}
	t.Logf("%d of %d requests were answered before SIGKILL; all found after restart", len(answered), inFlight)
}
