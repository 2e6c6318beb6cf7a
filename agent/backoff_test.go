package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
)

// down is a model server that is down: every call fails at once, as a
// connection refused does; it records when each call came and closes
// called at the nth.
type down struct {
	mu     sync.Mutex
	at     []time.Time
	n      int
	called chan struct{}
}

func (d *down) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at = append(d.at, time.Now()); len(d.at) == d.n {
		close(d.called)
	}
	return nil, errors.New("dial tcp 127.0.0.1:11434: connect: connection refused")
}

// The waits before a failed model call is tried again span a model
// server's restart: by default 10 s, then twice as long each time (10,
// 20, 40 s: 70 s in all, where Ollama takes 10-60 s to load a model),
// and each at most a minute, however long the backoff set (1m: 1, 1, 1
// min; before, 1, 2, 4 min). Before, the default's 1 + 2 + 4 s failed
// the step while the server was still starting.
func TestRetryWaits(t *testing.T) {
	for _, c := range []struct {
		name    string
		backoff time.Duration // 0: the default
		rand    float64       // what the spread's random source gives
		want    []time.Duration
	}{
		{"default", 0, 0, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}},
		{"a minute", time.Minute, 0, []time.Duration{time.Minute, time.Minute, time.Minute}},
		{"a second", time.Second, 0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		// Spread: jobs the same outage failed at once come back apart,
		// each wait cut by up to a quarter, never lengthened.
		{"spread", 0, 0.5, []time.Duration{8750 * time.Millisecond, 17500 * time.Millisecond, 35 * time.Second}},
		{"spread to its most", time.Minute, 0.999, []time.Duration{45015 * time.Millisecond, 45015 * time.Millisecond, 45015 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				task := r.send(t, "go")
				m := &down{n: agent.MaxAPIRetries + 1, called: make(chan struct{})}
				rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
					ContextTokens: 8000, Backoff: c.backoff, Rand: func() float64 { return c.rand }})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { rt.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				select {
				case <-m.called:
				case <-time.After(time.Hour):
					t.Fatalf("%d calls in an hour; want %d", len(m.at), m.n)
				}
				m.mu.Lock()
				defer m.mu.Unlock()
				for i, want := range c.want {
					if got := m.at[i+1].Sub(m.at[i]); got != want {
						t.Errorf("wait %d: %v; want %v", i+1, got, want)
					}
				}
				synctest.Wait()
				got, err := r.store.Get(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != agent.InterventionRequired {
					t.Errorf("job %s after %d calls; want %s", got.Status, len(m.at), agent.InterventionRequired)
				}
			})
		})
	}
}
