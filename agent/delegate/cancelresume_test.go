package delegate_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A step given up whose tasks/cancel the delegate does not answer, then a
// job resumed whose next step opens a new task, and ends: both tasks are
// canceled at the end, the first a second time. Before, the next step's
// record took the place of the one saying the first task's cancel was not
// answered: the job's end canceled the new task alone, and the first
// kept running on the delegate.
func TestDelegateUnansweredCancelSurvivesTheNextStep(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		block := make(chan struct{})
		defer close(block)
		looked := make(chan struct{})
		var (
			mu       sync.Mutex
			sends    int
			canceled []string
			lookOnce sync.Once
		)
		working := func(id string) *tasks.Task {
			return &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}}
		}
		reply := func(c call) *tasks.Task {
			mu.Lock()
			defer mu.Unlock()
			switch c.method {
			case "message/send":
				sends++
				if sends == 1 {
					return working("remote-1")
				}
				return answerTask("remote-2", completed)
			case "tasks/get":
				lookOnce.Do(func() { close(looked) })
				return working("remote-1")
			case "tasks/cancel":
				canceled = append(canceled, c.taskID)
				if len(canceled) == 1 {
					mu.Unlock()
					<-block // the step's tasks/cancel: never answered
					mu.Lock()
					return nil
				}
				return &tasks.Task{ID: c.taskID, Status: tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}}
			}
			return nil
		}
		d, _, _ := setup(t, reply, once, func(cfg *delegate.Config) { cfg.CancelTimeout = 300 * time.Millisecond })
		var fired sync.Once
		delegate.TimeOutStepsOn(d, func(int) <-chan struct{} {
			var c <-chan struct{}
			fired.Do(func() { c = looked }) // the first step's alone
			return c
		})
		r := newRowOn(t, dsn, "job-1")
		if _, err := d.Complete(t.Context(), r.prompt()); err == nil {
			t.Fatal("the step ended without an error")
		}
		d.EndJob("job-1")
		// The job waits for a human, who resumes it; its next step opens
		// a new task, answered.
		r.waits()
		r.resume()
		r.claim()
		if c, err := d.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
			t.Fatalf("the resumed step: %+v, %v", c, err)
		}
		r.answered()
		r.j.Status, r.j.Reason, r.j.UpdatedAt = agent.Canceled, "the task was canceled", time.Now().UTC()
		if err := r.s.Write(t.Context(), agent.Save{Job: r.j, Holder: holder, Release: true}); err != nil {
			t.Fatal(err)
		}
		list, err := r.s.CanceledSent(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if err := d.CancelJob(t.Context(), c.TaskID, c.Sent); err != nil {
				t.Errorf("CancelJob = %v; want the delegate's answer", err)
			}
		}
		mu.Lock()
		got := slices.Clone(canceled)
		mu.Unlock()
		slices.Sort(got)
		if want := []string{"remote-1", "remote-1", "remote-2"}; !slices.Equal(got, want) {
			t.Errorf("the delegate got tasks/cancel for %q; want %q: the step's, unanswered, then both tasks at the job's end", got, want)
		}
	})
}
