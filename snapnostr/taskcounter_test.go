package snapnostr_test

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// taskCounter serves tasks/get as agent, answering each request with its
// task id and counting, under mu, the requests handled by task id: what
// the catch-up tests need to tell each stored request processed once.
type taskCounter struct {
	mu      sync.Mutex
	handled map[string]int
	// wait, when set, is waited for before a request is handled.
	wait func(ctx context.Context) error
	// counted, when set, is called under mu once a request is counted.
	counted func(id string)
}

// server returns the snap.Server of agent that counts in c, its
// Validator made of cfg (Self set to agent's address).
func (c *taskCounter) server(agent *identity.Key, cfg snap.Config) *snap.Server {
	c.handled = map[string]int{}
	router := snap.NewRouter()
	router.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		if c.wait != nil {
			if err := c.wait(ctx); err != nil {
				return nil, err
			}
		}
		var p struct {
			TaskID string `json:"taskId"`
		}
		if err := json.Unmarshal(req.Payload, &p); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.handled[p.TaskID]++
		if c.counted != nil {
			c.counted(p.TaskID)
		}
		c.mu.Unlock()
		return map[string]any{"task": map[string]any{"id": p.TaskID}}, nil
	})
	cfg.Self = agent.Address(identity.Mainnet)
	return snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: quiet(),
		MaxResponseSize: relay.MaxNIP44Plain, Validator: snap.NewValidator(cfg)})
}
