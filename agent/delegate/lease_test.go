package delegate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/tasks"
)

// A step sent again from what the Delegate holds in memory (its exchange
// failed, and the runtime tries it again) is sent only while the node
// still holds the job: once another process claimed it (this one's lease
// lapsed, as when it was paused), the step is not sent, and that process
// alone goes on with the job's task. Before, only a step's first send
// checked the lease (its record, KeepSent): the step was sent again by
// both processes.
func TestDelegateStepSentAgainOnlyByTheJobsHolder(t *testing.T) {
	var (
		mu    sync.Mutex
		sends int
	)
	first, stop := make(chan struct{}), make(chan struct{})
	d, _, _ := setup(t, func(c call) *tasks.Task {
		if c.method == "message/send" {
			mu.Lock()
			sends++
			n := sends
			mu.Unlock()
			if n == 1 {
				close(first)
				<-stop // not answered in the step: the exchange fails
			}
		}
		return answerTask("remote-1", completed)
	})
	r := newRow(t, "job-1")
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-first; cancel() }()
	if _, err := d.Complete(ctx, r.prompt()); err == nil {
		t.Fatal("the first exchange was answered")
	}
	close(stop)
	// Another process claims the job, this one's lease lapsed.
	now := time.Now()
	if err := r.s.Release(t.Context(), r.j.TaskID, holder); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.s.Claim(t.Context(), r.j.TaskID, "node-2", now, now.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	_, err := d.Complete(t.Context(), r.prompt())
	if !errors.Is(err, agent.ErrLeaseLost) {
		t.Errorf("the step tried again: %v; want agent.ErrLeaseLost", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sends != 1 {
		t.Errorf("%d message/send; want 1: the step is not sent again by a process that no longer holds the job", sends)
	}
}
