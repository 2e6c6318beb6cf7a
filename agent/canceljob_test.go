package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// elsewhere is a Model that starts work elsewhere for each job, as a
// delegate does: its step records that work in the job's row
// (Prompt.KeepSent), then fails as a broken worker (the job waits for a
// human), with answer set answers it, or, with block set, waits until its
// call ends. It reports each step begun on stepped and each CancelJob on
// canceled.
type elsewhere struct {
	block    bool
	answer   string
	stepped  chan string
	canceled chan string
}

func newElsewhere(block bool) *elsewhere {
	return &elsewhere{block: block, stepped: make(chan string, 10), canceled: make(chan string, 10)}
}

func (m *elsewhere) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	job := p.Job.JobID
	if err := p.KeepSent(ctx, []byte("work of "+job)); err != nil {
		return nil, err
	}
	m.stepped <- job
	if m.answer != "" {
		return &agent.Completion{Text: m.answer}, nil
	}
	if m.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: it broke", agent.ErrWorkerFailed)
}

func (m *elsewhere) CancelJob(_ context.Context, job string, sent []byte) error {
	m.canceled <- job + ": " + string(sent)
	return nil
}

var _ agent.JobCanceler = (*elsewhere)(nil)

// next is what the next CancelJob was called with; none within 20 s
// fails the test.
func (m *elsewhere) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-m.canceled:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("the job's work elsewhere was not canceled")
		return ""
	}
}

// workedBy has holder claim the job of id and record work elsewhere for
// it (Store.KeepSent), as its model's step does.
func (r *rig) workedBy(t *testing.T, id, holder, work string) {
	t.Helper()
	ctx := t.Context()
	if ok, err := r.store.Claim(ctx, id, holder, time.Now(), time.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if err := r.store.KeepSent(ctx, id, holder, []byte(work)); err != nil {
		t.Fatal(err)
	}
}

// leftBy has holder, which holds the job of id, write it st with reason
// and give it up, and returns the job as written.
func (r *rig) leftBy(t *testing.T, id, holder string, st agent.Status, reason string) *agent.Job {
	t.Helper()
	j, err := r.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	j.Status, j.Reason = st, reason
	if err := r.store.Write(t.Context(), agent.Save{Job: j, Holder: holder, Release: true}); err != nil {
		t.Fatal(err)
	}
	return j
}

// noCancelAgain checks that the work elsewhere already canceled is not
// canceled again: no record is left to take, and a node started anew
// cancels, in its first reconcile pass, only a job canceled meanwhile,
// which tells that the pass is done.
func (m *elsewhere) noCancelAgain(t *testing.T, r *rig) {
	t.Helper()
	if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 0 {
		t.Fatalf("CanceledSent = %+v, %v; want none", list, err)
	}
	marker := r.send(t, "canceled meanwhile").ID
	r.workedBy(t, marker, "node-0", "work of "+marker)
	r.leftBy(t, marker, "node-0", agent.Canceled, "the task was canceled")
	stop := r.startRuntime(t, m, 1, 0)
	if got := m.next(t); got != marker+": work of "+marker {
		t.Errorf("CancelJob(%s); want %s's alone", got, marker)
	}
	stop() // its CancelJob calls are done
	select {
	case c := <-m.canceled:
		t.Errorf("CancelJob(%s) again", c)
	default:
	}
}

// A job canceled ends the work its model started elsewhere for it (a
// delegate's task on another agent), whichever way it was canceled: in a
// step, while it waited for a human (the node up or down), or by a node
// that stopped before it canceled that work. It is canceled once: a
// later start does not cancel it again. Before, only a step the delegate
// gave up on canceled it.
func TestCanceledJobCancelsItsWorkElsewhere(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		cancelTask := func(t *testing.T, id string) {
			t.Helper()
			if _, err := taskstest.Cancel(ctx, r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		want := func(t *testing.T, m *elsewhere, id string) {
			t.Helper()
			if got := m.next(t); got != id+": work of "+id {
				t.Errorf("CancelJob(%s); want %s with its record", got, id)
			}
		}

		// In a step.
		m := newElsewhere(true)
		inStep := r.send(t, "in a step").ID
		stop := r.startRuntime(t, m, 1, 0)
		<-m.stepped
		cancelTask(t, inStep)
		want(t, m, inStep)
		stop()

		// While it waits for a human, the node up; the node down.
		m = newElsewhere(false)
		up, down := r.send(t, "waits, node up").ID, r.send(t, "waits, node down").ID
		r.run(t, m, up, tasks.StateInputRequired)
		r.run(t, m, down, tasks.StateInputRequired)
		cancelTask(t, down)
		stop = r.startRuntime(t, m, 1, 0)
		want(t, m, down)
		cancelTask(t, up)
		want(t, m, up)
		stop()

		// Canceled by a node that stopped before it canceled the work.
		left := r.send(t, "left").ID
		r.workedBy(t, left, "node-0", "work of "+left)
		r.leftBy(t, left, "node-0", agent.Canceled, "the task was canceled")
		cancelTask(t, left)
		stop = r.startRuntime(t, m, 1, 0)
		want(t, m, left)
		stop()

		// Once: nothing is left to cancel at the next start.
		m.noCancelAgain(t, r)
	})
}

// A job that ends other than in success ends the work its model started
// elsewhere for it, as a canceled one does: here a job halted at its step
// limit between steps, and a job whose task failed elsewhere while it was
// queued. Each is canceled once. Before, their records were dropped and
// the work left open (a delegate's task at work, or waiting for a step
// that never comes).
func TestEndedJobCancelsItsWorkElsewhere(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		m := newElsewhere(false)
		m.answer = fuThink
		halted := r.send(t, "halted").ID
		r.runWith(t, func(c *agent.Config) { c.MaxSteps = 1 }, m, halted, tasks.StateFailed)
		if got := m.next(t); got != halted+": work of "+halted {
			t.Errorf("CancelJob(%s); want %s with its record", got, halted)
		}
		if j, err := r.store.Get(t.Context(), halted); err != nil || j.Status != agent.HaltedTime {
			t.Fatalf("job %+v, %v; want it %s", j, err, agent.HaltedTime)
		}

		// Failed elsewhere while queued, by a node that had worked on it.
		ctx := t.Context()
		failed := r.send(t, "failed").ID
		r.workedBy(t, failed, "node-0", "work of "+failed)
		if err := r.store.Release(ctx, failed, "node-0"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.Transition(ctx, failed, tasks.StateFailed, "failed elsewhere"); err != nil {
			t.Fatal(err)
		}
		stop := r.startRuntime(t, m, 1, 0)
		if got := m.next(t); got != failed+": work of "+failed {
			t.Errorf("CancelJob(%s); want %s with its record", got, failed)
		}
		stop()
		m.noCancelAgain(t, r)
	})
}
