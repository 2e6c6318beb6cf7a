package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
)

// cancelCrashEnv makes the test binary the node of
// TestCancelElsewhereSurvivesACrash that takes a job's record to cancel
// and is killed before the cancel is sent: it holds the database's DSN.
const cancelCrashEnv = "SNAPNODE_AGENT_CANCEL_CRASH"

// crashingCanceler is a JobCanceler that says on its standard output that
// it was given a job's record to cancel, and sends nothing: the parent
// kills the process then.
type crashingCanceler struct{ scripted }

func (*crashingCanceler) CancelJob(_ context.Context, job string, sent []byte) error {
	fmt.Fprintf(os.Stdout, "taken %s: %s\n", job, sent) // unbuffered: one write
	select {}
}

var _ agent.JobCanceler = (*crashingCanceler)(nil)

// TestCancelCrashNode is the child process of
// TestCancelElsewhereSurvivesACrash; it skips unless started by it. It
// runs a node on the database, whose first reconcile pass takes the
// record to cancel, until the process is killed.
func TestCancelCrashNode(t *testing.T) {
	dsn := os.Getenv(cancelCrashEnv)
	if dsn == "" {
		t.Skip("the node process of TestCancelElsewhereSurvivesACrash")
	}
	r := newRig(t, dsn)
	r.runtimeOn(t, &crashingCanceler{}, func(c *agent.Config) { c.Holder, c.Lease = "node-crashed", time.Minute })
	select {} // never: the parent kills the process
}

// A node killed after it took a job's record of its model's work
// elsewhere to cancel (a delegate's task), before the cancel was sent,
// leaves the record: once the dead node's take (its lease, a minute)
// lapsed, the next node takes it and cancels that work, and forgets the
// record once it is canceled. Before, the take forgot the record at once:
// the work was never canceled.
func TestCancelElsewhereSurvivesACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		id := r.send(t, "canceled while no node ran").ID
		r.workedBy(t, id, "node-0", "work of "+id)
		r.leftBy(t, id, "node-0", agent.Canceled, "the task was canceled")

		child := testutil.StartChild(t, "TestCancelCrashNode", cancelCrashEnv+"="+dsn)
		line, err := child.Lines.ReadString('\n')
		if want := "taken " + id + ": work of " + id + "\n"; line != want {
			t.Fatalf("the node said %q, %v; want %q", line, err, want)
		}
		child.Kill(t)
		child.WaitKilled(t)

		if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 1 || list[0].TaskID != id {
			t.Fatalf("CanceledSent after the crash = %+v, %v; want %s's record", list, err, id)
		}
		// The next node, once the dead node's take lapsed.
		m := newElsewhere(false)
		_, stop := r.runtimeOn(t, m, func(c *agent.Config) {
			c.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		})
		if got := m.next(t); got != id+": work of "+id {
			t.Fatalf("CancelJob(%s); want %s's", got, id)
		}
		stop() // its CancelJob calls, and the forgetting after, are done
		if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 0 {
			t.Errorf("CanceledSent once canceled = %+v, %v; want none", list, err)
		}
	})
}

// cancelFailsOnce is elsewhere whose first CancelJob fails, as a peer
// that does not answer the cancel: it closes failed then.
type cancelFailsOnce struct {
	*elsewhere
	calls  atomic.Int32
	failed chan struct{}
}

func (m *cancelFailsOnce) CancelJob(ctx context.Context, job string, sent []byte) error {
	if m.calls.Add(1) == 1 {
		close(m.failed)
		return errors.New("the cancel was not answered")
	}
	return m.elsewhere.CancelJob(ctx, job, sent)
}

// A cancel of a job's work elsewhere that fails (its peer did not answer)
// leaves the record taken: once the take lapses (the node's lease), a
// later reconcile pass takes it again and sends the cancel again, and the
// record is forgotten once that one succeeded. Before, the record was
// forgotten when taken, and the failed cancel never sent again.
func TestCancelElsewhereTriedAgainWhenNotAnswered(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	id := r.send(t, "canceled while no node ran").ID
	r.workedBy(t, id, "node-0", "work of "+id)
	r.leftBy(t, id, "node-0", agent.Canceled, "the task was canceled")
	m := &cancelFailsOnce{elsewhere: newElsewhere(false), failed: make(chan struct{})}
	var later atomic.Int64 // the runtime's clock, ahead of the real one
	_, stop := r.runtimeOn(t, m, func(c *agent.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	})
	<-m.failed
	if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 1 {
		t.Fatalf("CanceledSent after the failed cancel = %+v, %v; want the record", list, err)
	}
	later.Store(int64(time.Minute)) // the take (the lease, 30 s) lapsed
	if got := m.next(t); got != id+": work of "+id {
		t.Fatalf("CancelJob(%s); want %s's", got, id)
	}
	stop()
	if list, err := r.store.CanceledSent(t.Context(), 10); err != nil || len(list) != 0 {
		t.Errorf("CanceledSent once canceled = %+v, %v; want none", list, err)
	}
	if n := m.calls.Load(); n != 2 {
		t.Errorf("CancelJob called %d times; want 2", n)
	}
}
