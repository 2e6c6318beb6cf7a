package node_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
)

// Two replicas on one PostgreSQL database: a peer follows its task over
// SSE on the first (tasks/resubscribe) while it cancels the task through
// the second. The stream gets the cancellation the other replica wrote
// and ends with it, instead of waiting for events only its own replica
// writes.
func TestStreamOnOneReplicaFollowsTheOther(t *testing.T) {
	dsn := testdb.Postgres(t)
	keyFile, shared := sharedKeyFile(t, t.TempDir())
	sandbox := t.TempDir()
	if err := os.WriteFile(filepath.Join(sandbox, "old.txt"), []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replica := func() string {
		n, _ := startNode(t, func(c *config.Config) {
			c.KeyFile, c.Database, c.SandboxDir, c.HTTPListen = keyFile, dsn, sandbox, "127.0.0.1:0"
		})
		return n.HTTPURL() + "/snap"
	}
	a, b := replica(), replica()
	alice, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewHTTP(client.HTTPConfig{Key: alice})
	addr := shared.Address(identity.Mainnet)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A deletion waits for an operator: the task stays input_required.
	body, _ := json.Marshal(proposal("DELETE_FILE", map[string]any{"path": "/sandbox/old.txt"}))
	resp, err := c.To(a, addr).Send(ctx, "message/send", body)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(resp.Payload, &sent); err != nil || sent.Task.Status.State != "input_required" {
		t.Fatalf("message/send: %s", resp.Payload)
	}
	id := sent.Task.ID

	subscribed := make(chan struct{})
	var states []string
	type result struct {
		final *snap.Message
		err   error
	}
	done := make(chan result, 1)
	go func() {
		p, _ := json.Marshal(map[string]any{"taskId": id})
		final, err := c.To(a, addr).Stream(ctx, "tasks/resubscribe", p, func(ev *snap.Message) error {
			var e struct {
				State   string `json:"state"`
				Current bool   `json:"current"`
			}
			_ = json.Unmarshal(ev.Payload, &e)
			if e.Current {
				close(subscribed) // the stream follows the task from here
				return nil
			}
			if e.State != "" {
				states = append(states, e.State)
			}
			return nil
		})
		done <- result{final, err}
	}()
	select {
	case <-subscribed:
	case r := <-done:
		t.Fatalf("the stream ended before it began: %v, %v", r.final, r.err)
	}
	p, _ := json.Marshal(map[string]any{"taskId": id})
	if _, err := c.To(b, addr).Send(ctx, "tasks/cancel", p); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the stream on the first replica: %v (states %v)", r.err, states)
	}
	if len(states) == 0 || states[len(states)-1] != "canceled" {
		t.Errorf("the stream on the first replica streamed states %v; want the cancellation", states)
	}
	var final struct {
		Task struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(r.final.Payload, &final); err != nil || final.Task.Status.State != "canceled" {
		t.Errorf("final response %s; want the canceled task", r.final.Payload)
	}
}
