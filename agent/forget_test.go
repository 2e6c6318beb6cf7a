package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// keptTasks knows the tasks in kept; any other is gone (the task
// retention deleted it).
type keptTasks struct {
	Tasks
	kept map[string]bool
}

func (k keptTasks) Task(_ context.Context, id string) (*tasks.Task, error) {
	if !k.kept[id] {
		return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": id})
	}
	return &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateCompleted}}, nil
}

// An ended job whose task the node's retention deleted is forgotten, with
// its history, once it ended ForgetAfter ago; a job whose task is kept,
// one that ended recently and one still waiting stay. Before, every job's
// history stayed forever, however many tasks the retention deleted.
func TestForgetJobsOfDeletedTasks(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		kept := map[string]bool{}
		// 150 old ended jobs, the first 100 (a whole page) with their
		// task kept: the pages go on past them.
		for i := range 150 {
			id := fmt.Sprintf("old-%03d", i)
			mustCreate(t, ctx, s, storeJob(id, Success, at(time.Duration(i)*time.Second)))
			if i < 100 {
				kept[id] = true
			}
		}
		// A history longer than one transaction of Forget deletes.
		gone := storeJob("old-gone-with-history", HaltedCost, at(0))
		mustCreate(t, ctx, s, gone)
		for seq := range 250 {
			if err := s.Write(ctx, Save{Job: gone, Interaction: storeInteraction(seq, "a step"),
				Recovery: &RecoveryPoint{CheckpointID: fmt.Sprintf("cp-%d", seq), Sequence: seq}}); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(t, ctx, s, storeJob("recent-gone", Success, at(23*time.Hour)), storeJob("waiting-gone", InterventionRequired, at(0)))
		rt := &Runtime{cfg: Config{Store: s, Tasks: keptTasks{kept: kept}, ForgetAfter: 12 * time.Hour, Now: func() time.Time { return at(24 * time.Hour) }},
			log: slog.New(slog.DiscardHandler)}
		rt.forget(ctx)
		rt.forget(ctx)
		for id := range kept {
			mustGet(t, ctx, s, id)
		}
		for _, id := range []string{"recent-gone", "waiting-gone"} {
			mustGet(t, ctx, s, id)
		}
		for _, id := range []string{"old-gone-with-history", "old-120", "old-149"} {
			if _, err := s.Get(ctx, id); err == nil {
				t.Errorf("job %s is kept; want it forgotten with its task", id)
			}
		}
		if its, err := s.Interactions(ctx, "old-gone-with-history"); err != nil || len(its) != 0 {
			t.Errorf("the forgotten job's history: %d interactions, %v", len(its), err)
		}
		if rps, err := s.RecoveryPoints(ctx, "old-gone-with-history"); err != nil || len(rps) != 0 {
			t.Errorf("the forgotten job's recovery points: %d, %v", len(rps), err)
		}
	})
}

// Looking for ended jobs reads the index of the ended jobs in its order (a
// page of them), not every ended job sorted: the query Ended makes on
// SQLite (PostgreSQL's planner has the statistics to choose).
func TestEndedUsesItsIndex(t *testing.T) {
	s, err := OpenStore(t.Context(), testdb.Open(t, testdb.SQLite(t)))
	if err != nil {
		t.Fatal(err)
	}
	plan := testdb.QueryPlan(t, s.db.R, "SELECT task_id FROM agent_jobs "+s.endedWhere(), 1, 0, 0, "", 100)
	if got := fmt.Sprint(plan); !strings.Contains(got, "agent_jobs_ended") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("plan %s: want the index agent_jobs_ended, in its order", got)
	}
}
