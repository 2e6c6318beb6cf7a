package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// A job rewound by a process that stopped before it canceled the old
// work elsewhere, then claimed by a node whose reconcile pass has not come
// round yet, has that work canceled beside its new work when it ends:
// each record to cancel is kept apart, and the end's gives up the new
// one alone. Before, the end's write put the new record over the old one,
// never canceled (a claim canceled it first, a stopgap the records' rows
// replace).
func TestRewoundWorkLeftIsCanceledBesideTheNew(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		id := r.send(t, "rewound elsewhere").ID
		// Worked on by node-0, which left it waiting for a human.
		r.workedBy(t, id, "node-0", "undone work")
		j := r.leftBy(t, id, "node-0", agent.InterventionRequired, "which file?")

		// A job canceled while no node ran, whose cancel of its work
		// elsewhere tells that node-1's first reconcile pass is done.
		first := r.send(t, "canceled before the start").ID
		r.workedBy(t, first, "node-0", "first's work")
		r.leftBy(t, first, "node-0", agent.Canceled, "the task was canceled")

		// node-1 runs, its next reconcile pass long off (Poll an hour).
		m := newElsewhere(true)
		rt, _ := r.runtimeOn(t, m, func(c *agent.Config) { c.Poll = time.Hour })
		if got := m.next(t); got != first+": first's work" {
			t.Fatalf("CancelJob(%s); want %s's", got, first)
		}

		// Another process rewinds the job and stops before it cancels
		// the undone work.
		j.Status, j.Reason = agent.Pending, ""
		if err := r.store.Write(ctx, agent.Save{Job: j, Expect: agent.InterventionRequired, Rewound: true, Input: "restarted from a checkpoint"}); err != nil {
			t.Fatal(err)
		}
		rt.Wake()
		<-m.stepped
		if _, err := taskstest.Cancel(ctx, r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
		got := []string{m.next(t), m.next(t)}
		slices.Sort(got)
		if want := []string{id + ": undone work", id + ": work of " + id}; !slices.Equal(got, want) {
			t.Errorf("CancelJob %q; want %q", got, want)
		}
	})
}
