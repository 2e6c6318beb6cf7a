package delegate_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// refuser is a delegate that opens a task at a job's first step, at work,
// and then answers it with garbage, or with an error response when
// errors is set; it records the tasks/cancel it gets.
type refuser struct {
	errors   bool
	mu       sync.Mutex
	canceled []string
}

func (p *refuser) reply(c call) *tasks.Task {
	switch c.method {
	case "message/send":
		if c.taskID == "" {
			return &tasks.Task{ID: "remote-opened", Status: tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}}
		}
		return answerTask(c.taskID, completed)
	case "tasks/get":
		if p.errors {
			return nil // an error response: no such task
		}
		return answerTask(c.taskID, `not an answer`)
	case "tasks/cancel":
		p.mu.Lock()
		p.canceled = append(p.canceled, c.taskID)
		p.mu.Unlock()
		return &tasks.Task{ID: c.taskID, Status: tasks.Status{State: tasks.StateCanceled, Timestamp: time.Now()}}
	}
	return nil
}

// A step whose message/send opened a task on the delegate, whose answer
// is then refused (garbage, or an error response), keeps that task with
// the job, as an answered step's is: the job waits for a human, goes on
// with that task when resumed, and its cancel (or any end other than
// success) cancels the task.
// Before, the record named no task (the step's had none when sent), and
// the task opened was never canceled.
func TestDelegateRefusedAnswerKeepsTheTaskItOpened(t *testing.T) {
	for _, errs := range []bool{false, true} {
		name := "garbage"
		if errs {
			name = "error"
		}
		t.Run(name, func(t *testing.T) {
			p := &refuser{errors: errs}
			d, _, ids := setup(t, p.reply)
			r := newRow(t, "job-1")
			if _, err := d.Complete(t.Context(), r.prompt()); err == nil {
				t.Fatal("the refused answer was taken")
			}
			r.waits() // a refused answer: the job waits for a human
			d.EndJob("job-1")
			// A human's message: the job goes on with that task.
			r.resume()
			r.claim()
			if c, err := d.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
				t.Fatalf("the resumed step: %+v, %v", c, err)
			}
			r.answered()
			if len(*ids) != 2 || (*ids)[1] != "remote-opened" {
				t.Errorf("taskIds %q; want the resumed step on the task the refused step opened", *ids)
			}
			d.EndJob("job-1")
			sent := r.ends(agent.Canceled, agent.Save{Holder: holder, Release: true})
			if sent == nil {
				t.Fatal("no record to cancel")
			}
			d.CancelJob(t.Context(), "job-1", sent)
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.canceled) != 1 || p.canceled[0] != "remote-opened" {
				t.Errorf("tasks/cancel for %q (record %s); want the task the refused step opened, once", p.canceled, sent)
			}
		})
	}
}

// A delegate's task id is checked as SNAP's ids are (1–128 characters of
// [A-Za-z0-9_-]) before the node records it with the job, continues or
// cancels it: a task id too long, or with other characters, is refused
// as an answer without a task, nothing of it is kept, and a long one is
// cut where the step's error names it. Before, any string the delegate
// chose (up to its message's size) was stored in the job's row, named in
// the log and continued.
func TestDelegateRefusesABadTaskID(t *testing.T) {
	for _, id := range []string{strings.Repeat("a", snap.MaxIDLength+1), "remote 1", "remote/../1", "rémote"} {
		d, _, _ := setup(t, func(c call) *tasks.Task { return answerTask(id, completed) })
		r := newRow(t, "job-1")
		c, err := d.Complete(t.Context(), r.prompt())
		if err == nil {
			t.Errorf("task id %.20q…: answer %+v taken; want it refused", id, c)
		}
		var k struct {
			Task     string `json:"task"`
			Answered *struct {
				Task string `json:"task"`
			} `json:"answered"`
		}
		if sent := r.prompt().Sent; sent != nil {
			if err := json.Unmarshal(sent, &k); err != nil {
				t.Fatal(err)
			}
		}
		if k.Task != "" || k.Answered != nil && k.Answered.Task != "" {
			t.Errorf("task id %.20q…: the job's record keeps %.40q / %+v; want none", id, k.Task, k.Answered)
		}
		if err != nil && len(id) > 64 && strings.Contains(err.Error(), id) {
			t.Errorf("the step's error names the long id in full: %.200s…", err)
		}
	}
}
