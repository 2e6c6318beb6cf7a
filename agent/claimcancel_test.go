package agent_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// readFault is the read pool of a database (sqldb.DB.R) whose first query
// holding match, with arg as its first argument, fails once armed; it
// closes fired then.
type readFault struct {
	drv        driver.Driver
	name       string
	match, arg string
	armed      atomic.Bool
	fired      chan struct{}
}

// failReadOnce gives r's database a read pool (the store's reads) that
// fails the read holding match for the job of id once armed (readFault),
// the pool it had given back when the test ends.
func (r *rig) failReadOnce(t *testing.T, dsn, match, id string) *readFault {
	t.Helper()
	name := dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		name = path + "?_busy_timeout=5000&_query_only=1"
	}
	f := &readFault{drv: r.db.R.Driver(), name: name, match: match, arg: id, fired: make(chan struct{})}
	pool, was := sql.OpenDB(f), r.db.R
	r.db.R = pool
	t.Cleanup(func() { r.db.R = was; _ = pool.Close() })
	return f
}

func (f *readFault) Connect(context.Context) (driver.Conn, error) {
	c, err := f.drv.Open(f.name)
	if err != nil {
		return nil, err
	}
	return faultConn{Conn: c, f: f}, nil
}

func (f *readFault) Driver() driver.Driver { return f.drv }

type faultConn struct {
	driver.Conn
	f *readFault
}

func (c faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if strings.Contains(query, c.f.match) && len(args) > 0 && args[0].Value == c.f.arg && c.f.armed.CompareAndSwap(true, false) {
		close(c.f.fired)
		return nil, errors.New("the read failed")
	}
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

// said is a log's writer that closes on the first line holding what.
type said struct {
	what string
	once atomic.Bool
	on   chan struct{}
}

func (s *said) Write(p []byte) (int, error) {
	if strings.Contains(string(p), s.what) && s.once.CompareAndSwap(false, true) {
		close(s.on)
	}
	return len(p), nil
}

// A claim whose read of the job's record left to cancel (the work
// elsewhere a rewind gave up) fails does not start the job's step: it
// leaves the job to its lease, and the claim that takes it up once that
// lapses cancels that work first; the job's end then cancels the new work, and each is
// canceled once. Before, the claim logged the failure and went on: the
// step kept a new record, and the end's write put it over the old one,
// whose work was never canceled.
func TestClaimWhoseReadOfWorkLeftFailsStartsNoStep(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		id := r.send(t, "rewound elsewhere").ID
		r.workedBy(t, id, "node-0", "undone work")
		j := r.leftBy(t, id, "node-0", agent.InterventionRequired, "which file?")
		fault := r.failReadOnce(t, dsn, "SELECT model_sent_cancel FROM agent_jobs WHERE task_id", id)

		// A job canceled while no node ran, whose cancel of its work
		// elsewhere tells that node-1's first reconcile pass is done.
		first := r.send(t, "canceled before the start").ID
		r.workedBy(t, first, "node-0", "first's work")
		r.leftBy(t, first, "node-0", agent.Canceled, "the task was canceled")

		// node-1 runs, its next reconcile pass long off (Poll an hour).
		m := newElsewhere(true)
		released := &said{what: "claimed again once it lapses", on: make(chan struct{})}
		var later atomic.Int64 // the runtime's clock, ahead of the real one
		rt, _ := r.runtimeOn(t, m, func(c *agent.Config) {
			c.Poll = time.Hour
			c.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
			c.Logger = slog.New(slog.NewTextHandler(released, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		if got := m.next(t); got != first+": first's work" {
			t.Fatalf("CancelJob(%s); want %s's", got, first)
		}

		// Another process rewinds the job and stops before it cancels
		// the undone work; node-1's claim fails to read that record.
		j.Status, j.Reason = agent.Pending, ""
		if err := r.store.Write(ctx, agent.Save{Job: j, Expect: agent.InterventionRequired, Rewound: true, Input: "restarted from a checkpoint"}); err != nil {
			t.Fatal(err)
		}
		fault.armed.Store(true)
		rt.Wake()
		<-fault.fired
		select {
		case <-released.on:
			later.Store(int64(time.Minute)) // the lease (30 s) lapsed
			rt.Wake()
			<-m.stepped
		case <-m.stepped:
			// The job stepped on with its old work left to cancel.
		case <-time.After(20 * time.Second):
			t.Fatal("the job neither stepped nor was left to its lease")
		}
		if _, err := taskstest.Cancel(ctx, r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
		got := []string{m.next(t)}
		select {
		case c := <-m.canceled:
			got = append(got, c)
		case <-time.After(10 * time.Second):
		}
		slices.Sort(got)
		if want := []string{id + ": undone work", id + ": work of " + id}; !slices.Equal(got, want) {
			t.Errorf("CancelJob %q; want %q", got, want)
		}
	})
}
