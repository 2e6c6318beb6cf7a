package delegate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/tasks"
)

// heldPeer is recording whose answer to each message/send is held until
// release closes; got receives a value as each message/send arrives.
type heldPeer struct {
	recording
	got     chan struct{}
	release chan struct{}
}

func newHeldPeer() *heldPeer {
	return &heldPeer{got: make(chan struct{}, 8), release: make(chan struct{})}
}

func (p *heldPeer) reply(c call) *tasks.Task {
	if c.method == "message/send" {
		p.got <- struct{}{}
		<-p.release
	}
	return p.recording.reply(c)
}

// opened is the tasks the peer opened, and the tasks/cancel it got.
func (p *heldPeer) opened() (opened, canceled []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idempotent.mu.Lock()
	defer p.idempotent.mu.Unlock()
	for _, id := range p.tasks {
		opened = append(opened, id)
	}
	return opened, append([]string(nil), p.canceled...)
}

// A job that ends (canceled, or at its time limit) while its first
// message/send to the delegate is in flight cancels the task that send
// opens, once: the send's answer is still read after the step gave up,
// and the task it names is canceled as a known task is. Before, the
// send's answer was dropped with the step's context, the task was never
// learned, and it kept running on the delegate.
func TestDelegateCancelsTheTaskAnInFlightSendOpens(t *testing.T) {
	for _, c := range []struct {
		name  string
		cause error
		end   agent.Status
		want  error // the step's error
	}{
		{"job canceled", agent.ErrCanceled, agent.Canceled, context.Canceled},
		{"time limit", agent.ErrTimeLimit, agent.HaltedTime, agent.ErrTimeLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newHeldPeer()
			var logged lockedLog
			d, _, _ := setup(t, p.reply, logTo(&logged))
			r := newRow(t, "job-1")
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			// The delegate answers the job's first step once the job
			// has ended: the node gave up on the step before.
			go func() { <-p.got; cancel(c.cause); close(p.release) }()
			_, err := d.Complete(ctx, r.prompt())
			if !errors.Is(err, c.want) {
				t.Errorf("error %v; want %v", err, c.want)
			}
			d.EndJob("job-1") // as the runtime does when the job's run ends
			if sent := r.ends(c.end, agent.Save{Holder: holder, Release: true}); sent != nil {
				d.CancelJob(t.Context(), "job-1", sent)
			}
			opened, canceled := p.opened()
			if len(opened) != 1 || len(canceled) != 1 || canceled[0] != opened[0] {
				t.Errorf("the delegate opened %q and got tasks/cancel for %q; want the task opened canceled, once\nlog:\n%s", opened, canceled, logged.String())
			}
		})
	}
}

// A first step stopped while its message/send is in flight because the
// job went to another process (its lease lost) leaves the task the send
// opens at work: the process that took the job sends the step again with
// its idempotency key, and continues that task. Nothing cancels it.
func TestDelegateInFlightSendLeftToTheNodeThatTookTheJob(t *testing.T) {
	p := newHeldPeer()
	var cfg delegate.Config
	d, _, ids := setup(t, p.reply, func(c *delegate.Config) { cfg = *c })
	r := newRow(t, "job-1")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	go func() { <-p.got; cancel(agent.ErrLeaseLost); close(p.release) }()
	if _, err := d.Complete(ctx, r.prompt()); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v; want the step stopped", err)
	}
	other, err := delegate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := other.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
		t.Fatalf("the step sent again: %+v, %v", c, err)
	}
	opened, canceled := p.opened()
	if len(opened) != 1 || len(canceled) != 0 {
		t.Errorf("the delegate opened %q and got tasks/cancel for %q; want one task, not canceled", opened, canceled)
	}
	p.idempotent.mu.Lock()
	defer p.idempotent.mu.Unlock()
	if len(p.keys) != 2 || p.keys[0] != p.keys[1] || len(*ids) != 2 || (*ids)[1] != "" {
		t.Errorf("keys %q, taskIds %q; want the step sent twice with one key", p.keys, *ids)
	}
}

// A step that times out while its message/send, the job's first, is in
// flight cancels the task that send opens, once, as it cancels a known
// task: its error says so, and the job's record says it canceled, so
// that the job's later end sends nothing more.
func TestDelegateStepTimeOutCancelsTheTaskAnInFlightSendOpens(t *testing.T) {
	p := newHeldPeer()
	d, _, _ := setup(t, p.reply)
	// The step times out once the delegate has its message/send; the
	// delegate answers only then.
	fire := make(chan struct{})
	go func() { <-p.got; close(fire) }()
	delegate.TimeOutStepsThen(d, func(int) <-chan struct{} { return fire }, func() { close(p.release) })
	r := newRow(t, "job-1")
	_, err := d.Complete(t.Context(), r.prompt())
	opened, canceled := p.opened()
	if len(opened) != 1 || len(canceled) != 1 || canceled[0] != opened[0] {
		t.Fatalf("the delegate opened %q and got tasks/cancel for %q; want the task opened canceled, once", opened, canceled)
	}
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "its task "+opened[0]+" on the delegate was canceled (tasks/cancel)") {
		t.Errorf("error %v; want the time-out, saying the task was canceled", err)
	}
	d.EndJob("job-1")
	if sent := r.ends(agent.Canceled, agent.Save{Holder: holder, Release: true}); sent != nil {
		d.CancelJob(t.Context(), "job-1", sent)
	}
	if _, canceled := p.opened(); len(canceled) != 1 {
		t.Errorf("tasks/cancel for %q; want the one the step sent", canceled)
	}
}
