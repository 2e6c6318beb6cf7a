package delegate_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// row is a job's row in the node's store, held by the node, as the agent
// runtime keeps it around each step: what a step is given of what the
// model recorded (Prompt.Sent), its records (Prompt.KeepSent), and the
// writes that follow.
type row struct {
	t *testing.T
	s *agent.Store
	j *agent.Job
}

const holder = "node-1"

func newRow(t *testing.T, job string) *row {
	t.Helper()
	return newRowOn(t, testdb.SQLite(t), job)
}

// newRowOn is newRow on the database of dsn.
func newRowOn(t *testing.T, dsn, job string) *row {
	t.Helper()
	ctx := t.Context()
	s, err := agent.OpenStore(ctx, testdb.Open(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	j := &agent.Job{TaskID: job, Requester: "bc1p-requester", Description: "do it", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: now, UpdatedAt: now}
	if ok, err := s.Create(ctx, j); err != nil || !ok {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	r := &row{t: t, s: s, j: j}
	r.claim()
	return r
}

// claim takes the job up, as a node (re)started does.
func (r *row) claim() {
	r.t.Helper()
	now := time.Now()
	if ok, err := r.s.Claim(r.t.Context(), r.j.TaskID, holder, now, now.Add(time.Hour)); err != nil || !ok {
		r.t.Fatalf("Claim = %v, %v", ok, err)
	}
	r.j.Status = agent.Running
	r.write(nil)
}

// prompt is the job's next step as the runtime asks it.
func (r *row) prompt() agent.Prompt {
	r.t.Helper()
	_, _, sent, _, err := r.s.StepInput(r.t.Context(), r.j.TaskID)
	if err != nil {
		r.t.Fatal(err)
	}
	p := prompt(r.j.TaskID, r.j.NextSeq)
	p.Sent, p.SentAnswered = sent.Record, sent.Answered
	p.KeepSent = func(ctx context.Context, b []byte) error { return r.s.KeepSent(ctx, r.j.TaskID, holder, b) }
	p.KeepSentCanceling = func(ctx context.Context, b, cancel []byte) error {
		return r.s.KeepSentCanceling(ctx, r.j.TaskID, holder, b, cancel)
	}
	return p
}

// answered records the step's answer.
func (r *row) answered() {
	r.t.Helper()
	it := &agent.Interaction{Sequence: r.j.NextSeq, Timestamp: time.Now().UTC(), StateBefore: agent.Running, WorkspacePath: "/sandbox/",
		Request:  agent.Request{Messages: []agent.ChatMessage{{Role: agent.RoleUser, Content: "do it"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work"}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindAgentResponse, Action: agent.ActionCompleted, RawResponse: completed, NewStatus: agent.Running}}
	r.j.NextSeq++
	r.write(it)
}

// waits makes the job wait for a human, and the node let it go.
func (r *row) waits() {
	r.t.Helper()
	r.j.Status, r.j.Reason = agent.InterventionRequired, "which file?"
	r.write(nil)
	r.stop()
}

// stop lets the job go, as a node that stops does.
func (r *row) stop() {
	r.t.Helper()
	if err := r.s.Release(r.t.Context(), r.j.TaskID, holder); err != nil {
		r.t.Fatal(err)
	}
}

// resume queues the job again with a human's message.
func (r *row) resume() {
	r.t.Helper()
	if ok, err := r.s.AddInput(r.t.Context(), r.j.TaskID, "the file is a.md", true, time.Now()); err != nil || !ok {
		r.t.Fatalf("AddInput = %v, %v", ok, err)
	}
}

func (r *row) write(it *agent.Interaction) {
	r.t.Helper()
	r.j.UpdatedAt = time.Now().UTC()
	if err := r.s.Write(r.t.Context(), agent.Save{Job: r.j, Interaction: it, Holder: holder}); err != nil {
		r.t.Fatal(err)
	}
}

// The job's task on the delegate is kept with the job: a node restarted
// after a step was answered (its Delegate new, its store the same), and
// the node that takes up a job a human's message resumed, continue the
// job's task with the next step, as the node that ran on does. Before,
// both opened a new task with the job request, the old one left open.
func TestDelegateTaskKeptAcrossRestartAndWait(t *testing.T) {
	var (
		peer idempotent
		cfg  delegate.Config
	)
	d, _, ids := setup(t, peer.reply, func(c *delegate.Config) { cfg = *c })
	step := func(d *delegate.Delegate, r *row) {
		t.Helper()
		if c, err := d.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
			t.Fatalf("step %d: %+v, %v", r.j.NextSeq, c, err)
		}
		r.answered()
	}
	restart := func() *delegate.Delegate {
		t.Helper()
		d, err := delegate.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	r := newRow(t, "job-1")
	step(d, r)
	r.stop()
	d = restart()
	r.claim()
	step(d, r)
	r.waits()
	d.EndJob("job-1") // as the runtime does when the job waits
	r.resume()
	r.claim()
	step(d, r)
	r.waits()
	d = restart()
	r.resume()
	r.claim()
	step(d, r)
	if len(*ids) != 4 || (*ids)[0] != "" || !strings.HasPrefix((*ids)[1], "remote-") || (*ids)[1] != (*ids)[2] || (*ids)[1] != (*ids)[3] {
		t.Errorf("taskIds %q; want none, then the job's task at every later step", *ids)
	}
	if len(peer.tasks) != 1 {
		t.Errorf("%d tasks on the delegate; want 1", len(peer.tasks))
	}
}

// A job canceled while it is not in a step (it waits for a human, is
// queued, or the node was down) cancels its task on the delegate: the
// runtime gives the Delegate the job's record (agent.JobCanceler), here
// after a restart, and the Delegate sends tasks/cancel for the task, once.
// A task the node canceled already, giving up on a step, is not canceled
// again, and a job that never made one sends nothing.
func TestDelegateCanceledJobCancelsItsTask(t *testing.T) {
	p := newPeer()
	p.first = true
	var cfg delegate.Config
	d, _, _ := setup(t, p.reply, func(c *delegate.Config) { cfg = *c })
	r := newRow(t, "job-1")
	if _, err := d.Complete(t.Context(), r.prompt()); err != nil {
		t.Fatal(err)
	}
	r.answered()
	r.waits()
	d, err := delegate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A step times out once the delegate is at work on it (its first
	// tasks/get): job-2's second step.
	delegate.TimeOutStepsOn(d, func(int) <-chan struct{} { return p.looked })
	sent := r.prompt().Sent
	d.CancelJob(t.Context(), "job-1", sent)
	if got := p.cancels(); len(got) != 1 || got[0] != "remote-1" {
		t.Fatalf("the delegate got tasks/cancel for %q; want remote-1, once", got)
	}

	// The step given up on (its time-out) canceled the task already.
	r2 := newRow(t, "job-2")
	if _, err := d.Complete(t.Context(), r2.prompt()); err != nil {
		t.Fatal(err)
	}
	r2.answered()
	if _, err := d.Complete(t.Context(), r2.prompt()); err == nil {
		t.Fatal("the step was answered; want its time-out")
	}
	if got := p.cancels(); len(got) != 2 {
		t.Fatalf("the delegate got tasks/cancel for %q; want the step's", got)
	}
	d.CancelJob(t.Context(), "job-2", r2.prompt().Sent)
	d.CancelJob(t.Context(), "job-3", nil)
	if got := p.cancels(); len(got) != 2 {
		t.Errorf("the delegate got tasks/cancel for %q; want none more", got)
	}
}

// ends ends the job in st, as the runtime's write of its end does, and
// returns the record it gives up to be canceled (agent.Store.CanceledSent;
// nil: none), taken as the runtime takes it before it calls CancelJob.
func (r *row) ends(st agent.Status, w agent.Save) []byte {
	r.t.Helper()
	r.j.Status, r.j.Reason, r.j.UpdatedAt = st, "it ended", time.Now().UTC()
	w.Job = r.j
	if err := r.s.Write(r.t.Context(), w); err != nil {
		r.t.Fatal(err)
	}
	list, err := r.s.CanceledSent(r.t.Context(), 10)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, c := range list {
		if c.TaskID == r.j.TaskID {
			now := time.Now()
			if n, err := r.s.TakeCanceledSent(r.t.Context(), c.TaskID, c.Sent, now, now.Add(time.Minute)); err != nil || n != 1 {
				r.t.Fatalf("TakeCanceledSent = %v, %v", n, err)
			}
			return c.Sent
		}
	}
	return nil
}

// recording is idempotent that also records the tasks/cancel it gets and
// the data of each message/send.
type recording struct {
	idempotent
	mu       sync.Mutex
	canceled []string
	data     []string
}

func (p *recording) reply(c call) *tasks.Task {
	p.mu.Lock()
	switch c.method {
	case "tasks/cancel":
		p.canceled = append(p.canceled, c.taskID)
		p.mu.Unlock()
		return &tasks.Task{ID: c.taskID, Status: tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}}
	case "message/send":
		p.data = append(p.data, string(c.data))
	}
	p.mu.Unlock()
	return p.idempotent.reply(c)
}

// A job that ends other than in success (halted at its cost, step or time
// limit between steps, its task failed) cancels its task on the delegate,
// once, as a canceled one does; one that succeeds, on the delegate's
// final answer, sends nothing. Before, the halted job's record was
// dropped and its task on the delegate left open.
func TestDelegateEndedJobCancelsItsTask(t *testing.T) {
	var p recording
	d, _, ids := setup(t, p.reply)
	for _, st := range []agent.Status{agent.HaltedCost, agent.HaltedTime, agent.Success} {
		r := newRow(t, "job-"+string(st))
		if _, err := d.Complete(t.Context(), r.prompt()); err != nil {
			t.Fatal(err)
		}
		r.answered()
		d.EndJob(r.j.TaskID) // as the runtime does when the job's run ends
		sent := r.ends(st, agent.Save{Holder: holder, Release: true})
		if (sent == nil) != (st == agent.Success) {
			t.Fatalf("%s: the record to cancel is %q", st, sent)
		}
		if sent != nil {
			d.CancelJob(t.Context(), r.j.TaskID, sent)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(*ids) != 3 || len(p.canceled) != 2 || p.canceled[0] == p.canceled[1] || !strings.HasPrefix(p.canceled[0], "remote-") {
		t.Errorf("tasks/cancel for %q (tasks %q); want the halted jobs' two tasks, once each", p.canceled, *ids)
	}
}

// A job rewound to a checkpoint (agent.Runtime.ResumeFrom) cancels its
// task on the delegate, whose history holds the steps undone, once, and
// its next step opens a new task with the job request, which tells the
// delegate what the job's model is told after the rewind (the operator's
// note of the checkpoint and of what the host undid) as the latest
// observation. Before, the next step continued the old task.
func TestDelegateRewoundJobOpensANewTask(t *testing.T) {
	var p recording
	d, _, ids := setup(t, p.reply)
	r := newRow(t, "job-1")
	for range 2 {
		if _, err := d.Complete(t.Context(), r.prompt()); err != nil {
			t.Fatal(err)
		}
		r.answered()
	}
	r.waits()
	d.EndJob("job-1")
	sent := r.ends(agent.Pending, agent.Save{Expect: agent.InterventionRequired, Rewound: true,
		Input: "An operator restarted the job from checkpoint work-complete-1"})
	if sent == nil {
		t.Fatal("the rewind gave no record up to cancel")
	}
	d.CancelJob(t.Context(), "job-1", sent)
	r.claim()
	pr := r.prompt()
	pr.Messages = append(pr.Messages[:2:2], agent.ChatMessage{Role: agent.RoleUser, Content: "An operator restarted the job from checkpoint work-complete-1"})
	if pr.Sent != nil {
		t.Fatalf("the rewound job's step is given the record %q; want none", pr.Sent)
	}
	if _, err := d.Complete(t.Context(), pr); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(*ids) != 3 || (*ids)[0] != "" || (*ids)[1] == "" || (*ids)[2] != "" {
		t.Fatalf("taskIds %q; want a new task at the first step and after the rewind", *ids)
	}
	if len(p.canceled) != 1 || p.canceled[0] != (*ids)[1] {
		t.Errorf("tasks/cancel for %q; want the old task %s, once", p.canceled, (*ids)[1])
	}
	var req agent.JobRequest
	if err := json.Unmarshal([]byte(p.data[2]), &req); err != nil || req.JobID != "job-1" ||
		!strings.Contains(req.TaskDescription, "restarted the job from checkpoint work-complete-1") {
		t.Errorf("the rewound step sent %s (%v); want the job request telling the rewind", p.data[2], err)
	}
}
