package delegate_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// forgetful is a delegate's reply that keeps no idempotency keys, as an
// agent of the reference SDK: each message/send without a taskId makes a
// task. It records each message/send's task and key.
type forgetful struct {
	mu    sync.Mutex
	sends []call
	made  int
}

func (f *forgetful) reply(c call) *tasks.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := c.taskID
	if c.method == "message/send" {
		f.sends = append(f.sends, c)
		if id == "" {
			f.made++
			id = "remote-" + snap.NewID()
		}
	}
	return answerTask(id, completed)
}

// A step an endpoint of the delegate took and answered HTTP 500 without
// a SNAP response (as an agent of the reference SDK answers its
// handler's failures, after the handler made or continued the task) is
// not sent again: not by the fallback (client.ToCard), nor by the
// runtime, which would send it again with the same idempotency key to a
// delegate that may keep none. The job waits for a human, the reason
// saying what happened and that the delegate may have acted on the step;
// the job's record keeps its task, which the step that resumes it
// continues, with a key of its own. Before, the step's error was a
// failed exchange, which the runtime tries again up to its retries (each
// time a task more on such a delegate), then leaves the job saying that
// "the model server" failed.
func TestDelegateStepTakenWithoutAnswerWaitsForAHuman(t *testing.T) {
	var peer forgetful
	p := &posts{}
	d, rec, _ := setupHTTP(t, peer.reply, p.wrap, withHTTP(true))
	r := newRow(t, "job-1")

	if c, err := d.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
		t.Fatalf("step 0: %+v, %v", c, err)
	}
	r.answered()

	p.status.Store(http.StatusInternalServerError)
	_, err := d.Complete(t.Context(), r.prompt())
	if !errors.Is(err, agent.ErrWorkerFailed) {
		t.Fatalf("step 1 answered HTTP 500: %v; want agent.ErrWorkerFailed, the job waiting for a human", err)
	}
	for _, want := range []string{"HTTP 500", "step 1", "may have", "not sent again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the reason %q does not say %q", err, want)
		}
	}
	if n := p.n.Load(); n != 2 {
		t.Errorf("%d POSTs; want 2, step 1's sent once", n)
	}
	if got := rec.Entries(); len(got) != 1 || !strings.Contains(string(got[0].Detail), "unanswered") {
		t.Errorf("audit entries %+v; want the step's, rule unanswered", got)
	}
	r.j.NextSeq++
	r.waits()

	// A human's message resumes the job: its next step continues the
	// job's task, with a key of its own.
	r.resume()
	r.claim()
	p.status.Store(0)
	if c, err := d.Complete(t.Context(), r.prompt()); err != nil || c.Text != completed {
		t.Fatalf("the resumed step: %+v, %v", c, err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if len(peer.sends) != 3 || peer.made != 1 {
		t.Fatalf("%d message/send made %d tasks; want 3 (one a step), one task", len(peer.sends), peer.made)
	}
	s := peer.sends
	if s[1].taskID == "" || s[2].taskID != s[1].taskID || s[2].key == s[1].key {
		t.Errorf("the resumed step went on task %q with key %q; want the job's task %q, a key other than %q",
			s[2].taskID, s[2].key, s[1].taskID, s[1].key)
	}
}
