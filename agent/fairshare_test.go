package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// gateModel holds each job's first model call until the test releases
// that job (then answers FINISH) or the job's context ends; it tells the
// test each job whose call came, by the job's task line.
type gateModel struct {
	started chan string
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func newGateModel() *gateModel {
	return &gateModel{started: make(chan string, 64), gates: map[string]chan struct{}{}}
}

func (g *gateModel) gate(task string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[task]
	if !ok {
		c = make(chan struct{})
		g.gates[task] = c
	}
	return c
}

func (g *gateModel) release(task string) { close(g.gate(task)) }

func (g *gateModel) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	task := strings.Split(p.Messages[1].Content, "\n")[1]
	g.started <- task
	select {
	case <-g.gate(task):
		return &agent.Completion{Text: proposalJSON("FINISH", map[string]any{"response": "done"})}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// next returns the job whose model call comes next.
func (g *gateModel) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-g.started:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no job started within 20 s")
		return ""
	}
}

// sendAs sends who a free-text task whose text is text.
func (r *rig) sendAs(t *testing.T, who, text string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": text}}}})
	if _, err := taskstest.Send(context.Background(), r.svc, who, payload); err != nil {
		t.Fatal(err)
	}
}

// startRuntime runs a runtime of maxJobs slots, perRequester of them at
// most for one requester (0: the default), on r with m until the test
// ends or the returned stop is called.
func (r *rig) startRuntime(t *testing.T, m agent.Model, maxJobs, perRequester int, uncapped ...string) (stop func()) {
	t.Helper()
	_, stop = r.runtimeOn(t, m, func(cfg *agent.Config) {
		cfg.MaxJobs, cfg.MaxJobsPerRequester = maxJobs, perRequester
		if uncapped != nil {
			cfg.Uncapped = func(requester string) bool { return slices.Contains(uncapped, requester) }
		}
	})
	return stop
}

// runtimeOn runs a runtime as node-1 on r with m (one slot, polling every
// 5 ms, as set changes it) until the test ends or the returned stop is
// called.
func (r *rig) runtimeOn(t *testing.T, m agent.Model, set func(*agent.Config)) (rt *agent.Runtime, stop func()) {
	t.Helper()
	cfg := agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
		ContextTokens: 8000, MaxJobs: 1, Holder: "node-1", Poll: 5 * time.Millisecond}
	if set != nil {
		set(&cfg)
	}
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return rt, stop
}

// One requester's many jobs do not take every slot: with four slots,
// alice's six jobs get two (the default share, half of max_jobs), and a
// job bob sends while hers run starts at once in a free slot, as does
// carol's; when every slot is taken, the first to free goes to a
// requester with none running (dave), not to alice's next.
func TestOneRequesterCannotTakeEverySlot(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	for i := range 6 {
		r.sendAs(t, "alice", fmt.Sprintf("alice %d", i))
	}
	m := newGateModel()
	r.startRuntime(t, m, 4, 0)
	var started []string
	expect := func(who string) {
		t.Helper()
		for {
			s := m.next(t)
			started = append(started, s)
			if strings.HasPrefix(s, who) {
				return
			}
			if strings.HasPrefix(s, "alice") && len(slices.DeleteFunc(slices.Clone(started), func(s string) bool { return !strings.HasPrefix(s, "alice") })) > 2 {
				t.Fatalf("jobs started %q while waiting for %s's: alice holds more than 2 of the 4 slots", started, who)
			}
		}
	}
	expect("alice")
	expect("alice")
	r.sendAs(t, "bob", "bob 0")
	expect("bob")
	r.sendAs(t, "carol", "carol 0")
	expect("carol")
	r.sendAs(t, "dave", "dave 0")
	m.release(started[0]) // one of alice's ends: a slot frees
	if s := m.next(t); s != "dave 0" {
		t.Fatalf("the freed slot went to %q, want dave's job (alice still runs one; dave none)", s)
	}
}

// The node's operators are not held to the share: an operator's six jobs
// take all four slots, where a peer's take two (the node's owner sending
// it tasks would otherwise have half of its slots).
func TestOperatorTakesEverySlot(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	for i := range 6 {
		r.sendAs(t, "alice", fmt.Sprintf("alice %d", i))
	}
	m := newGateModel()
	r.startRuntime(t, m, 4, 0, "alice")
	got := []string{m.next(t), m.next(t), m.next(t), m.next(t)}
	slices.Sort(got)
	if want := []string{"alice 0", "alice 1", "alice 2", "alice 3"}; !slices.Equal(got, want) {
		t.Fatalf("started %q, want alice's four oldest", got)
	}
}

// A restart keeps the queue's order and the share: the jobs that ran when
// the node stopped (alice's two oldest and bob's) are taken up first, not
// alice's later ones, and a requester who comes next still finds a slot.
func TestFairShareKeptAcrossRestart(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	for i := range 6 {
		r.sendAs(t, "alice", fmt.Sprintf("alice %d", i))
	}
	r.sendAs(t, "bob", "bob 0")
	want := []string{"alice 0", "alice 1", "bob 0"}
	first := func(m *gateModel) []string {
		got := []string{m.next(t), m.next(t), m.next(t)}
		slices.Sort(got)
		return got
	}
	m := newGateModel()
	stop := r.startRuntime(t, m, 4, 0)
	if got := first(m); !slices.Equal(got, want) {
		t.Fatalf("before the restart %q started, want %q", got, want)
	}
	stop()
	m = newGateModel()
	r.startRuntime(t, m, 4, 0)
	if got := first(m); !slices.Equal(got, want) {
		t.Fatalf("after the restart %q started, want %q (the jobs the node was working on)", got, want)
	}
	r.sendAs(t, "carol", "carol 0")
	if s := m.next(t); s != "carol 0" {
		t.Fatalf("after the restart the free slot went to %q, want carol's job", s)
	}
}
