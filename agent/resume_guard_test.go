package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

// A resume in progress (the job DRAFT while its rollbacks run) is not
// joined by a second one: an operator who runs `snapnode job resume`
// again (the first seemed to hang, or two operators at once) is refused,
// rather than rolling the workspace back a second time under the first
// and queueing the job with a note that is not what was done.
func TestResumeRefusedWhileAResumeRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		ex := &undoer{}
		rt := resumeRuntime(s, ex)
		var (
			started   bool // the hook runs on this goroutine only
			secondErr error
			secondRes *Resumed
		)
		ex.after = func() {
			if !started {
				started = true
				secondRes, secondErr = rt.ResumeFrom(ctx, "job", "work-complete-1")
			}
		}
		_, firstErr := rt.ResumeFrom(ctx, "job", "work-complete-1")
		if !errors.Is(secondErr, ErrNotResumable) {
			t.Errorf("a second resume during the first's rollbacks: %+v, %v; want ErrNotResumable (undone: %v)", secondRes, secondErr, ex.undone)
		}
		if firstErr != nil {
			t.Errorf("the first resume: %v", firstErr)
		}
		if j := mustGet(t, ctx, s, "job"); j.Status != Pending {
			t.Errorf("job %s; want PENDING", j.Status)
		}
	})
}

// canceledTasks shows every task canceled.
type canceledTasks struct{ Tasks }

func (canceledTasks) Task(_ context.Context, id string) (*tasks.Task, error) {
	return &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateCanceled}}, nil
}

// A job whose task was canceled is not resumed, even while the job still
// says it waits for a human (reconcile ends it on its next pass, up to
// 30 polls later): nothing is rolled back and the job is not queued, as
// a decision on a canceled task's held action is refused.
func TestResumeRefusedOnACanceledTask(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		ex := &undoer{}
		rt := resumeRuntime(s, ex)
		rt.cfg.Tasks = canceledTasks{}
		res, err := rt.ResumeFrom(ctx, "job", "work-complete-1")
		if !errors.Is(err, ErrNotResumable) || len(ex.undone) > 0 {
			t.Fatalf("ResumeFrom on a canceled task: %+v, %v, undid %v; want ErrNotResumable and nothing undone", res, err, ex.undone)
		}
		if j := mustGet(t, ctx, s, "job"); j.Status != InterventionRequired {
			t.Fatalf("job %s; want it left %s", j.Status, InterventionRequired)
		}
	})
}

// Nor by one in another process sharing the database (a replica, whose
// guard of resumes in progress is its own): the resume holds the job's
// lease from its claim to the job's queueing, and gives it up then, so
// that the job is claimed at once.
func TestResumeRefusedWhileAnotherProcessResumes(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		ex, otherEx := &undoer{}, &undoer{}
		rt, other := resumeRuntime(s, ex), resumeRuntime(s, otherEx)
		other.cfg.Holder = "another-process"
		// Each rollback takes 20 s, so that the second ends past the
		// first's lease of 30 s: the lease renewed before each rollback
		// holds the other process off.
		now := at(time.Hour)
		rt.cfg.Now = func() time.Time { return now }
		other.cfg.Now = rt.cfg.Now
		var (
			rollbacks int
			otherErr  error
		)
		ex.after = func() {
			now = now.Add(20 * time.Second)
			if rollbacks++; rollbacks == 2 {
				_, otherErr = other.ResumeFrom(ctx, "job", "work-complete-1")
			}
		}
		if _, err := rt.ResumeFrom(ctx, "job", "work-complete-1"); err != nil {
			t.Fatalf("the first resume: %v", err)
		}
		if !errors.Is(otherErr, ErrNotResumable) || len(otherEx.undone) > 0 {
			t.Errorf("a resume in another process during the first's rollbacks: %v, undid %v; want ErrNotResumable and nothing undone", otherErr, otherEx.undone)
		}
		if j := mustGet(t, ctx, s, "job"); j.Status != Pending || j.LeaseHolder != "" || j.LeaseUntil.After(now) {
			t.Errorf("job %s, lease %q until %v; want PENDING, no lease", j.Status, j.LeaseHolder, j.LeaseUntil)
		}
	})
}

// A job left DRAFT by a process that stopped during its resume is resumed
// by another once the stopped one's lease has lapsed, not before.
func TestResumeOfADraftLeftByAStoppedProcess(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		j := mustGet(t, ctx, s, "job")
		j.Status = Draft
		if err := s.Write(ctx, Save{Job: j, Expect: InterventionRequired, Holder: ResumeHolder("stopped-process"), LeaseUntil: at(time.Hour).Add(30 * time.Second), Now: at(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ex := &undoer{}
		rt := resumeRuntime(s, ex)
		if _, err := rt.ResumeFrom(ctx, "job", "work-complete-1"); !errors.Is(err, ErrNotResumable) || len(ex.undone) > 0 {
			t.Fatalf("resume while the stopped process's lease is live: %v, undid %v; want ErrNotResumable", err, ex.undone)
		}
		rt.cfg.Now = func() time.Time { return at(time.Hour).Add(31 * time.Second) }
		if res, err := rt.ResumeFrom(ctx, "job", "work-complete-1"); err != nil || len(res.RolledBack) != 2 {
			t.Fatalf("resume after the lease lapsed: %+v, %v", res, err)
		}
		if j := mustGet(t, ctx, s, "job"); j.Status != Pending {
			t.Fatalf("job %s; want PENDING", j.Status)
		}
	})
}

// A resume waits for the runner of a job that has just stopped to wait for
// a human to show that on the task (the runner saves the job waiting,
// then writes its task input_required, then settles the job and lets its
// lease go): a resume that began in between, in another process, set the
// task working only to have the runner's late write show it
// input_required while the resumed job ran. It is refused while the
// runner holds the job unsettled, and goes ahead once the runner settled.
func TestResumeWaitsForTheRunnerToShowTheWait(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		j := mustGet(t, ctx, s, "job")
		// The runner (another process) holds the lease and has just
		// saved the job waiting, its task not yet written.
		if _, err := s.exec(ctx, "test", "job", `UPDATE agent_jobs SET lease_holder = ?, lease_until = ? WHERE task_id = ?`,
			"runner", sqldb.Micros(at(time.Hour).Add(time.Minute)), "job"); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, Save{Job: j, Holder: "runner", Unsettled: true}); err != nil {
			t.Fatal(err)
		}
		ex := &undoer{}
		rt := resumeRuntime(s, ex)
		if res, err := rt.ResumeFrom(ctx, "job", "work-complete-1"); !errors.Is(err, ErrNotResumable) || len(ex.undone) > 0 {
			t.Fatalf("a resume while the runner has yet to show the wait: %+v, %v, undid %v; want ErrNotResumable and nothing undone", res, err, ex.undone)
		}
		if err := s.Settle(ctx, "job", InterventionRequired); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.ResumeFrom(ctx, "job", "work-complete-1"); err != nil {
			t.Fatalf("a resume once the runner showed the wait: %v", err)
		}
	})
}
