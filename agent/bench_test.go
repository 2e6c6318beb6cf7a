package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// writer is a zero-latency Model: each job writes (or, with read, reads)
// steps-1 distinct files, then finishes.
type writer struct {
	steps int
	read  bool
	calls atomic.Int64
}

func (w *writer) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	w.calls.Add(1)
	n := 0
	for _, m := range p.Messages {
		if m.Role == agent.RoleAssistant {
			n++
		}
	}
	if n >= w.steps-1 {
		return &agent.Completion{Text: proposalJSON("FINISH", map[string]any{"response": "done"})}, nil
	}
	if w.read {
		return &agent.Completion{Text: proposalJSON("READ_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/in-%d.md", n)}),
			PromptTokens: 100, CompletionTokens: 20}, nil
	}
	return &agent.Completion{Text: proposalJSON("WRITE_FILE", map[string]any{
		"path": fmt.Sprintf("/sandbox/%s-%d.md", uuid.NewString()[:8], n), "content": fmt.Sprintf("step %d\n", n)}),
		PromptTokens: 100, CompletionTokens: 20}, nil
}

// runJobs starts jobs free-text tasks and works on them until all are
// completed; it returns the history bytes stored.
func runJobs(b *testing.B, r *rig, m agent.Model, jobs, maxJobs int) int64 {
	ctx := context.Background()
	ids := make([]string, jobs)
	for i := range ids {
		payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
			"parts": []any{map[string]any{"text": "write some files"}}}})
		t, err := taskstest.Send(ctx, r.svc, fmt.Sprintf("requester-%d", i%50), payload)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
		ContextTokens: 16000, MaxJobs: maxJobs, MaxSteps: 1000, Lease: time.Minute, Poll: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rt.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	var bytes int64
	for i, id := range ids {
		// Waiting on the task's events, not polling the job: the
		// harness adds no work of its own to the figures.
		waitSettled(b, r, fmt.Sprintf("requester-%d", i%50), id)
		j, err := r.store.Get(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if j.Status != agent.Success {
			b.Fatalf("job %s: %s %s", id, j.Status, j.Reason)
		}
		bytes += j.HistoryBytes
	}
	return bytes
}

// waitSettled waits until the task leaves the working states.
func waitSettled(b *testing.B, r *rig, requester, taskID string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		cur, events, err := r.svc.Subscribe(ctx, requester, taskID)
		if err != nil {
			b.Fatal(err)
		}
		state := cur.Status.State
		for state == tasks.StateSubmitted || state == tasks.StateWorking {
			ev, ok := <-events
			if !ok {
				break // fell behind: subscribe again
			}
			if ev.Status != nil {
				state = ev.Status.State
			}
		}
		if state != tasks.StateSubmitted && state != tasks.StateWorking {
			return
		}
	}
}

// BenchmarkAgentStep measures the runtime's own cost of one step against a
// zero-latency model, on SQLite: the prompt, parsing the answer, the
// executor's whole pipeline for a WRITE_FILE (validation, policy, sandbox,
// diff, promotion, audit), the history write and the progress event. The
// baseline, measured in the same run, is the executor alone carrying out
// the same kind of proposal: the runtime's overhead is the difference.
func BenchmarkAgentStep(b *testing.B) {
	const steps = 20
	b.Run("baseline=executor.Run", func(b *testing.B) {
		r := newRig(b, testdb.SQLite(b))
		create := createCost(b, r.dir)
		ctx := context.Background()
		task, err := taskstest.Send(ctx, r.svc, "alice", []byte(`{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}`))
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			p := proposalJSON("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/b-%d.md", i), "content": fmt.Sprintf("step %d\n", i)})
			if res, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(p)}); err != nil || res.Outcome != executor.Completed {
				b.Fatal(res, err)
			}
		}
		b.ReportMetric(create, "create-µs")
	})
	for _, read := range []bool{false, true} {
		kind := "write"
		if read {
			kind = "read"
		}
		b.Run(fmt.Sprintf("runtime/%s-steps", kind), func(b *testing.B) {
			r := newRig(b, testdb.SQLite(b))
			for i := range steps {
				os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("in-%d.md", i)), []byte(strings.Repeat("a line of the input\n", 50)), 0o600)
			}
			create := createCost(b, r.dir)
			m := &writer{steps: steps, read: read}
			jobs := max(1, b.N/steps)
			b.ResetTimer()
			bytes := runJobs(b, r, m, jobs, 1)
			b.StopTimer()
			calls := m.calls.Load()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls), "ns/step")
			b.ReportMetric(float64(bytes)/float64(calls), "history-B/step")
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(create, "create-µs")
		})
	}
}

// createCost is what making a file costs in dir, in µs (the mean of 50
// empty files made, then removed), for the report beside a step's time: a
// write step makes a file, and on ext4 that cost depends on the block
// group the folder was given, from 50 µs to 800 µs on the same disk of
// our benchmark machine.
func createCost(b *testing.B, dir string) float64 {
	b.Helper()
	const n = 50
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf(".create-cost-%d", i)) }
	start := time.Now()
	for i := range n {
		f, err := os.OpenFile(name(i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	took := time.Since(start)
	for i := range n {
		os.Remove(name(i))
	}
	return float64(took.Microseconds()) / n
}

// BenchmarkAgentConcurrentJobs runs 1,000 jobs (3 steps each: two writes
// and FINISH) on SQLite against a zero-latency model, all at once and, as
// the baseline of the same run, four at a time (the default max_jobs); it
// reports steps a second, the peak heap above the start's (the memory per
// running job is the difference between the two, per job) and the history
// bytes per step.
func BenchmarkAgentConcurrentJobs(b *testing.B) {
	const jobs = 1000
	// The baseline is the same work with the default four jobs at once.
	for _, at := range []int{4, jobs} {
		b.Run(fmt.Sprintf("jobs-at-once=%d", at), func(b *testing.B) {
			for range b.N {
				// The queue holds all the jobs at once: the default
				// limits would refuse the newcomers past 512 of them.
				r := newRig(b, testdb.SQLite(b), agent.QueueLimits{MaxQueued: 2 * jobs, MaxQueuedPerRequester: jobs, MaxNewcomers: 2 * jobs})
				m := &writer{steps: 3}
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				var peak atomic.Uint64
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					var ms runtime.MemStats
					for {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond):
						}
						runtime.ReadMemStats(&ms)
						if ms.HeapInuse > peak.Load() {
							peak.Store(ms.HeapInuse)
						}
					}
				}()
				start := time.Now()
				bytes := runJobs(b, r, m, jobs, at)
				took := time.Since(start)
				close(stop)
				<-sampled
				calls := m.calls.Load()
				b.ReportMetric(float64(calls)/took.Seconds(), "steps/s")
				b.ReportMetric(float64(peak.Load()-min(peak.Load(), before.HeapInuse))/1e6, "peak-heap-MB")
				b.ReportMetric(float64(bytes)/float64(calls), "history-B/step")
			}
		})
	}
}

// BenchmarkQueueAdmit: a free-text send's admission to the agent's queue
// (Admit, then release once the job is stored), with 1,000 jobs queued by
// 50 requesters in SQLite. "count" is Admit, which reads the queue's count
// in memory; "query" is what Admit did before, for comparison in the
// same run: the count of the queued jobs, all and the requester's, with
// one query under a lock every send took.
func BenchmarkQueueAdmit(b *testing.B) {
	r := newRig(b, testdb.SQLite(b))
	q := agent.NewLimitedQueue(r.store, nil, agent.QueueLimits{MaxQueued: 1 << 20, MaxQueuedPerRequester: 1 << 20})
	ctx := context.Background()
	now := time.Now()
	for i := range 1_000 {
		j := &agent.Job{TaskID: uuid.NewString(), Requester: fmt.Sprintf("requester-%d", i%50), Description: "queued",
			Status: agent.Pending, Phase: "work", RecoverySeq: -1, ReviewSeq: -1, CreatedAt: now, UpdatedAt: now}
		if _, err := r.store.Create(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Recount(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("count", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				release, err := q.Admit(ctx, fmt.Sprintf("requester-%d", n.Add(1)%50), nil)
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	})
	b.Run("query", func(b *testing.B) {
		var (
			n  atomic.Int64
			mu sync.Mutex
		)
		stmt := r.db.Dialect.Rebind(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN requester = ? THEN 1 ELSE 0 END), 0)
			FROM agent_jobs WHERE status IN (?, ?, ?)`)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				var all, mine int64
				mu.Lock()
				err := r.db.R.QueryRowContext(ctx, stmt, fmt.Sprintf("requester-%d", n.Add(1)%50),
					string(agent.Pending), string(agent.Running), string(agent.Reviewing)).Scan(&all, &mine)
				mu.Unlock()
				if err != nil || all != 1_000 {
					b.Fatal(all, err)
				}
			}
		})
	})
}
