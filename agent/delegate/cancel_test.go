package delegate_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/tasks"
)

// peer is a delegate that takes each step and works on it, never
// answering: message/send and tasks/get return its task working, without
// a new answer (the first step after answered, when first is set, with
// the task's first answer). It records the tasks/cancel it receives and
// answers each with cancelReply (nil: the task, canceled).
type peer struct {
	first       bool
	cancelReply func() *tasks.Task
	looked      chan struct{} // closed at the first tasks/get

	mu       sync.Mutex
	sends    int
	canceled []string
	once     sync.Once
	answered *tasks.Task
}

func newPeer() *peer { return &peer{looked: make(chan struct{})} }

func (p *peer) reply(c call) *tasks.Task {
	working := &tasks.Task{ID: "remote-1", Status: tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}}
	switch c.method {
	case "message/send":
		p.mu.Lock()
		p.sends++
		p.mu.Unlock()
		if p.first {
			// The first step's answer; for the next, no longer new.
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.answered == nil {
				p.answered = answerTask("remote-1", completed)
				return p.answered
			}
			t := *p.answered
			t.Status.State = tasks.StateWorking
			return &t
		}
		return working
	case "tasks/get":
		p.once.Do(func() { close(p.looked) })
		return working
	case "tasks/cancel":
		p.mu.Lock()
		p.canceled = append(p.canceled, c.taskID)
		p.mu.Unlock()
		if p.cancelReply != nil {
			return p.cancelReply()
		}
		return &tasks.Task{ID: c.taskID, Status: tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}}
	}
	return nil
}

func (p *peer) cancels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.canceled...)
}

// lockedLog is a log's text, written from any goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logTo(l *lockedLog) func(*delegate.Config) {
	return func(c *delegate.Config) { c.Logger = slog.New(slog.NewTextHandler(l, nil)) }
}

// When the node gives up on a step the delegate is still working on (the
// step time-out, the job's time limit, the job canceled by its requester
// or an operator), it sends the delegate tasks/cancel for the job's task
// there, once, and says so: in the step's error (which the job's history
// and reason keep) and in the log. Before, the delegate's task was left
// working, for nothing.
func TestDelegateCancelsItsTaskWhenGivingUp(t *testing.T) {
	// The node gives up once the delegate has taken the step and is at
	// work on it (its first tasks/get): the step's time-out fires then
	// (delegate.TimeOutStepsOn), and the job's time limit or cancel is
	// the caller's context canceled with that cause, so that no real
	// time-out races the delegate's first answer.
	giveUp := func(cause error) func(p *peer) (context.Context, func()) {
		return func(p *peer) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() { <-p.looked; cancel(cause) }()
			return ctx, func() { cancel(nil) }
		}
	}
	for _, c := range []struct {
		name string
		// step is the step that is given up (1: the step after one
		// answered, on the task it made).
		step int
		// timeOut: the step times out once the delegate is at work.
		timeOut bool
		// stop ends the step; the delegate has taken it and is at work.
		stop func(p *peer) (context.Context, func())
		// check checks the step's error.
		check func(t *testing.T, err error)
	}{
		{"step time-out", 0, true, nil,
			func(t *testing.T, err error) {
				if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "within its step time-out") ||
					!strings.Contains(err.Error(), "its task remote-1 on the delegate was canceled (tasks/cancel)") {
					t.Errorf("error %v; want the time-out, saying the task was canceled", err)
				}
			}},
		{"step time-out of a later step", 1, true, nil,
			func(t *testing.T, err error) {
				if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "its task remote-1 on the delegate was canceled (tasks/cancel)") {
					t.Errorf("error %v; want the time-out, saying the task was canceled", err)
				}
			}},
		{"time limit", 0, false, giveUp(agent.ErrTimeLimit), func(t *testing.T, err error) {
			if errors.Is(err, agent.ErrWorkerFailed) || !errors.Is(err, agent.ErrTimeLimit) ||
				!strings.Contains(err.Error(), "its task remote-1 on the delegate was canceled (tasks/cancel)") {
				t.Errorf("error %v; want the job's time limit, saying the task was canceled", err)
			}
		}},
		{"job canceled", 0, false, giveUp(agent.ErrCanceled), func(t *testing.T, err error) {
			// The error is the canceled step's in the job's history:
			// it says what became of the task, as the log does.
			if errors.Is(err, agent.ErrWorkerFailed) || !errors.Is(err, context.Canceled) ||
				!strings.Contains(err.Error(), "its task remote-1 on the delegate was canceled (tasks/cancel)") {
				t.Errorf("error %v; want context.Canceled, no violation, saying the task was canceled", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPeer()
			p.first = c.step > 0
			var logged lockedLog
			d, _, _ := setup(t, p.reply, logTo(&logged))
			if c.timeOut {
				delegate.TimeOutStepsOn(d, func(step int) <-chan struct{} {
					if step == c.step {
						return p.looked
					}
					return nil
				})
			}
			ctx := context.Background()
			if c.step > 0 {
				if _, err := d.Complete(ctx, prompt("job-1", 0)); err != nil {
					t.Fatal(err)
				}
			}
			if c.stop != nil {
				var stop func()
				ctx, stop = c.stop(p)
				defer stop()
			}
			_, err := d.Complete(ctx, prompt("job-1", c.step))
			c.check(t, err)
			if got := p.cancels(); len(got) != 1 || got[0] != "remote-1" {
				t.Errorf("the delegate got tasks/cancel for %q; want remote-1, once", got)
			}
			if !strings.Contains(logged.String(), "the job's task on the delegate was canceled") {
				t.Errorf("log:\n%s\nwant the cancel said", logged.String())
			}
		})
	}
}

// A step stopped because the node stops (or the job went to another
// process) leaves the delegate's task at work: the job is taken up again
// and sends the step again on it, with its idempotency key, and uses its
// answer (TestDelegateKeptStepSentAgainAfterRestart).
func TestDelegateLeavesItsTaskWhenTheNodeStops(t *testing.T) {
	for _, cause := range []error{nil, agent.ErrLeaseLost} {
		p := newPeer()
		var logged lockedLog
		d, _, _ := setup(t, p.reply, logTo(&logged))
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { <-p.looked; cancel(cause) }()
		_, err := d.Complete(ctx, prompt("job-1", 0))
		if errors.Is(err, agent.ErrWorkerFailed) || !errors.Is(err, context.Canceled) {
			t.Errorf("cause %v: error %v; want context.Canceled, no violation", cause, err)
		}
		if got := p.cancels(); len(got) != 0 {
			t.Errorf("cause %v: the delegate got tasks/cancel for %q; want none", cause, got)
		}
		if !strings.Contains(logged.String(), "left at work") {
			t.Errorf("cause %v: log:\n%s\nwant the task said left at work", cause, logged.String())
		}
	}
}

// A delegate that refuses the cancel, or does not answer it, is not asked
// again: the step ends within Config.CancelTimeout of its time-out, and
// the log and the step's error say so, the delegate's message cut.
func TestDelegateCancelRefusedOrUnanswered(t *testing.T) {
	long := strings.Repeat("\x1b[31mnot now ", 4000) // 36 kB
	for _, c := range []struct {
		name  string
		reply func(block chan struct{}) *tasks.Task
		want  string
		// bound is Config.CancelTimeout: the cancel unanswered runs it
		// out; the refusal comes within it, however slow the test runs.
		bound time.Duration
	}{
		{"refused", func(chan struct{}) *tasks.Task { return &tasks.Task{Status: tasks.Status{Message: long}} }, "refused", time.Minute},
		{"unanswered", func(block chan struct{}) *tasks.Task { <-block; return nil }, "not answered", 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			block := make(chan struct{})
			p := newPeer()
			p.cancelReply = func() *tasks.Task { return c.reply(block) }
			var logged lockedLog
			d, _, _ := setup(t, p.reply, logTo(&logged), once, func(cfg *delegate.Config) {
				cfg.StepTimeout, cfg.CancelTimeout = time.Second, c.bound
			})
			// The step times out once the delegate is at work on it.
			delegate.TimeOutStepsOn(d, func(int) <-chan struct{} { return p.looked })
			t.Cleanup(func() { close(block) })
			began := time.Now()
			_, err := d.Complete(context.Background(), prompt("job-1", 0))
			if took := time.Since(began); c.bound < time.Minute && took > 10*time.Second {
				t.Errorf("the step took %v; want the cancel bounded", took)
			}
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "tasks/cancel") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %.600v; want the time-out, saying the cancel was %s", err, c.want)
			}
			if n := len(err.Error()); n > 2000 {
				t.Errorf("the error is %d bytes; want the delegate's message cut", n)
			}
			if got := p.cancels(); len(got) != 1 {
				t.Errorf("the delegate got tasks/cancel for %q; want remote-1, once", got)
			}
			if l := logged.String(); !strings.Contains(l, c.want) || len(l) > 6000 {
				t.Errorf("log (%d bytes):\n%.2000s\nwant the cancel %s, the delegate's message cut", len(l), l, c.want)
			}
		})
	}
}

// CancelJob returns nil once the delegate answered the cancel, a refusal
// included (a task it does not know: not found), and the error when it
// did not answer: the runtime then keeps the job's record and sends the
// cancel again later (agent.JobCanceler).
func TestDelegateCancelJobSaysWhetherAnswered(t *testing.T) {
	for _, c := range []struct {
		name    string
		reply   func(block chan struct{}) *tasks.Task // nil: the task, canceled
		wantErr bool
	}{
		{"canceled", nil, false},
		{"not found", func(chan struct{}) *tasks.Task { return nil }, false},
		{"unanswered", func(block chan struct{}) *tasks.Task { <-block; return nil }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			block := make(chan struct{})
			p := newPeer()
			p.first = true
			if c.reply != nil {
				p.cancelReply = func() *tasks.Task { return c.reply(block) }
			}
			d, _, _ := setup(t, p.reply, once, func(cfg *delegate.Config) { cfg.CancelTimeout = 500 * time.Millisecond })
			r := newRow(t, "job-1")
			if _, err := d.Complete(t.Context(), r.prompt()); err != nil {
				t.Fatal(err)
			}
			r.answered()
			err := d.CancelJob(t.Context(), "job-1", r.prompt().Sent)
			close(block) // the delegate's answer, too late
			if (err != nil) != c.wantErr {
				t.Errorf("CancelJob = %v; want an error: %v", err, c.wantErr)
			}
			if got := p.cancels(); len(got) != 1 || got[0] != "remote-1" {
				t.Errorf("the delegate got tasks/cancel for %q; want remote-1, once", got)
			}
		})
	}
}

// A step given up whose tasks/cancel the delegate does not answer leaves
// the task to be canceled again: the job's record does not say canceled,
// and the job's end (agent.JobCanceler) sends tasks/cancel again, until
// answered. Before, the record said canceled whatever the answer, and the
// job's CancelJob sent nothing: the task kept running on the delegate.
func TestDelegateStepCancelUnansweredIsSentAgain(t *testing.T) {
	for _, c := range []struct {
		name  string
		cause error // nil: the step's time-out
		end   agent.Status
	}{
		{"time-out", nil, agent.Canceled},
		{"job canceled", agent.ErrCanceled, agent.Canceled},
		{"time limit", agent.ErrTimeLimit, agent.HaltedTime},
	} {
		t.Run(c.name, func(t *testing.T) {
			block := make(chan struct{})
			defer close(block)
			p := newPeer()
			var calls atomic.Int32
			p.cancelReply = func() *tasks.Task {
				if calls.Add(1) == 1 {
					<-block // the step's tasks/cancel: never answered
					return nil
				}
				return &tasks.Task{ID: "remote-1", Status: tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}}
			}
			d, _, _ := setup(t, p.reply, once, func(cfg *delegate.Config) { cfg.CancelTimeout = 300 * time.Millisecond })
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if c.cause == nil {
				delegate.TimeOutStepsOn(d, func(int) <-chan struct{} { return p.looked })
			} else {
				go func() { <-p.looked; cancel(c.cause) }()
			}
			r := newRow(t, "job-1")
			if _, err := d.Complete(ctx, r.prompt()); err == nil {
				t.Fatal("the step ended without an error")
			}
			d.EndJob("job-1")
			sent := r.ends(c.end, agent.Save{Holder: holder, Release: true})
			if sent == nil {
				t.Fatal("the job's end left no record to cancel; want the task the unanswered cancel named")
			}
			if err := d.CancelJob(t.Context(), "job-1", sent); err != nil {
				t.Errorf("CancelJob = %v; want the delegate's answer", err)
			}
			if got := p.cancels(); len(got) != 2 || got[0] != "remote-1" || got[1] != "remote-1" {
				t.Errorf("the delegate got tasks/cancel for %q; want remote-1 twice: the step's, unanswered, and the job's", got)
			}
		})
	}
}
