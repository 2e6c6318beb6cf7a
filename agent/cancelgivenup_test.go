package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// unanswered is a JobCanceler whose peer never answers a cancel: each
// CancelJob fails, and is reported on calls.
type unanswered struct {
	scripted
	calls chan string
}

func (m *unanswered) CancelJob(_ context.Context, job string, _ []byte) error {
	m.calls <- job
	return errors.New("the peer did not answer")
}

var _ agent.JobCanceler = (*unanswered)(nil)

// A record of work elsewhere to cancel (a delegate's task) whose cancel
// is given up after its MaxCancelTries-th unanswered try is counted in
// the job's history (cancels_given_up), once, beside the ones dropped
// past the job's bound (cancels_dropped, which it leaves alone): the
// history explains that the work may still run without the node's log.
// Before, only the log said so.
func TestGivenUpCancelsInHistory(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		id := r.send(t, "canceled, its peer gone").ID
		r.workedBy(t, id, "node-0", "work of "+id)
		r.leftBy(t, id, "node-0", agent.Canceled, "the task was canceled")
		if _, err := taskstest.Cancel(context.Background(), r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
		m := &unanswered{calls: make(chan string, 2*agent.MaxCancelTries)}
		// Each read of the clock is an hour on: every reconcile pass
		// finds the last take lapsed, and takes the record again.
		base, hours := time.Now(), atomic.Int64{}
		_, stop := r.runtimeOn(t, m, func(c *agent.Config) {
			c.Now = func() time.Time { return base.Add(time.Duration(hours.Add(1)) * time.Hour) }
		})
		for range agent.MaxCancelTries {
			select {
			case <-m.calls:
			case <-time.After(20 * time.Second):
				t.Fatal("the record was not tried MaxCancelTries times")
			}
		}
		stop() // the last try's give-up is written
		if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 0 {
			t.Fatalf("CanceledSent = %+v, %v; want the record given up", list, err)
		}
		h, err := r.store.History(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if h.CancelsGivenUp != 1 || h.CancelsDropped != 0 {
			t.Errorf("cancels_given_up = %d, cancels_dropped = %d; want 1, 0", h.CancelsGivenUp, h.CancelsDropped)
		}
	})
}
