package agent

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// undoer is an Executor that only rolls back: it records each action
// undone and then calls after (nil: nothing). Like the executor, it
// refuses to start a rollback on a context that is done.
type undoer struct {
	mu     sync.Mutex
	undone []string
	after  func()
}

func (u *undoer) Rollback(ctx context.Context, actionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u.mu.Lock()
	u.undone = append(u.undone, actionID)
	u.mu.Unlock()
	if u.after != nil {
		u.after()
	}
	return nil
}

func (u *undoer) Run(context.Context, executor.Request) (*executor.Result, error) {
	return nil, errors.New("undoer: no Run")
}
func (u *undoer) Actions(context.Context, string) ([]executor.Action, error)  { return nil, nil }
func (u *undoer) Pending(context.Context, string) ([]executor.Pending, error) { return nil, nil }
func (u *undoer) Deny(context.Context, string, string, string) (*executor.Result, error) {
	return nil, errors.New("undoer: no Deny")
}

// resumable stores job "job", waiting for a human after a supervisor's
// STUCK: a write (act-0), the worker's COMPLETED (checkpoint
// work-complete-1, resumed in review), then two more writes (act-2,
// act-3) that a resume from the checkpoint undoes.
func resumable(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	j := storeJob("job", Running, storeT0)
	mustCreate(t, ctx, s, j)
	write := func(seq int) *Interaction {
		it := storeInteraction(seq, fmt.Sprintf("wrote %d", seq))
		it.Response.Action = "WRITE_FILE"
		it.Response.RawResponse = answerProposal(stuckID(seq), "write", "WRITE_FILE", `{"path":"/sandbox/a.md","content":"a"}`)
		return it
	}
	rp := &RecoveryPoint{CheckpointID: "work-complete-1", Sequence: 1, CanResumeFrom: true, ResumePhase: PhaseReview}
	for seq := range 4 {
		it := write(seq)
		save := Save{Job: j, Interaction: it}
		if seq == 1 {
			it.Response = Response{Status: ResponseSuccess, Kind: KindAgentResponse, Action: ActionCompleted,
				EvidenceFiles: []string{"/sandbox/a.md"}, SummaryForSupervisor: "done",
				RawResponse: `{"action":"COMPLETED","evidence_files":["/sandbox/a.md"],"summary_for_supervisor":"done"}`,
				NewStatus:   Reviewing}
			it.Observation = &Observation{Outcome: ObsCompleted}
			save.Recovery = rp
		}
		j.NextSeq = seq + 1
		if err := s.Write(ctx, save); err != nil {
			t.Fatal(err)
		}
	}
	j.Status, j.Phase, j.Reason = InterventionRequired, PhaseReview, "STUCK: a human should choose"
	if err := s.Write(ctx, Save{Job: j}); err != nil {
		t.Fatal(err)
	}
}

func resumeRuntime(s *Store, ex Executor) *Runtime {
	return &Runtime{cfg: Config{Store: s, Executor: ex, Queue: NewQueue(s, nil), Now: func() time.Time { return at(time.Hour) }, Holder: "this-process", Lease: 30 * time.Second},
		log: slog.New(slog.DiscardHandler), resuming: map[string]bool{}}
}

// Once the job is claimed for the resume, the resume is finished whatever
// becomes of the caller's context: a caller gone after the first rollback
// (the admin connection closed) leaves every rollback done and the job
// queued in the checkpoint's phase with the note to the model, neither
// DRAFT nor waiting over a half-restored workspace.
func TestResumeFinishesWithoutTheCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		ex := &undoer{after: cancel}
		res, err := resumeRuntime(s, ex).ResumeFrom(callCtx, "job", "work-complete-1")
		if err != nil {
			t.Fatalf("ResumeFrom: %v", err)
		}
		if callCtx.Err() == nil {
			t.Fatal("the rollback did not cancel the caller's context")
		}
		want := []string{"act-3", "act-2"}
		if !slices.Equal(ex.undone, want) || !slices.Equal(res.RolledBack, want) || res.Phase != PhaseReview {
			t.Fatalf("undone %v, resumed %+v; want %v undone, resumed in review", ex.undone, res, want)
		}
		j := mustGet(t, ctx, s, "job")
		if j.Status != Pending || j.Phase != PhaseReview || j.ReviewSeq != 1 || j.RecoverySeq != 4 || j.Reason != "" {
			t.Fatalf("job %s in %s (review_seq %d, recovery_seq %d, reason %q); want PENDING in review, review_seq 1, recovery_seq 4",
				j.Status, j.Phase, j.ReviewSeq, j.RecoverySeq, j.Reason)
		}
		in, err := s.PendingInput(ctx, "job")
		if err != nil || !strings.Contains(in, "restarted the job from checkpoint work-complete-1") || !strings.Contains(in, "actions act-3, act-2") {
			t.Fatalf("pending input %q, %v; want the note of the resume", in, err)
		}
	})
}

// A write that finishes the resume and fails (not for a cancellation)
// puts the job back to waiting for a human, the failure and what was
// undone as its reason: it never stays DRAFT, nor is it queued without
// the note. The note stays pending when it can be written, so that the
// operator's answer that queues the job tells the model what the host
// undid; when it cannot, the next resume adds the only note. The failures
// are injected by SQLite triggers.
func TestResumeFinishFailsBackToWaiting(t *testing.T) {
	const want = "queue the job with the note to the model"
	tests := []struct {
		name, trigger string
		noted         bool // the note is pending after the failure
	}{
		{"queueing the job", `CREATE TRIGGER fail_resume BEFORE UPDATE OF status ON agent_jobs
			WHEN OLD.status = 'DRAFT' AND NEW.status = 'PENDING' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, true},
		{"the note", `CREATE TRIGGER fail_resume BEFORE UPDATE OF pending_input ON agent_jobs
			WHEN NEW.pending_input <> OLD.pending_input BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			db := testdb.Open(t, testdb.SQLite(t))
			s, err := OpenStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			resumable(t, ctx, s)
			exec := func(q string) {
				t.Helper()
				if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, q)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			exec(tt.trigger)
			_, err = resumeRuntime(s, &undoer{}).ResumeFrom(ctx, "job", "work-complete-1")
			if err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("ResumeFrom = %v; want the injected failure", err)
			}
			j := mustGet(t, ctx, s, "job")
			if j.Status != InterventionRequired || !strings.Contains(j.Reason, want) ||
				!strings.Contains(j.Reason, "injected failure") || !strings.Contains(j.Reason, "actions act-3, act-2 undone") {
				t.Fatalf("job %s, reason %q; want %s, the failure of %s and what was undone as its reason",
					j.Status, j.Reason, InterventionRequired, want)
			}
			in, err := s.PendingInput(ctx, "job")
			if err != nil || strings.Count(in, "restarted the job") != map[bool]int{true: 1, false: 0}[tt.noted] ||
				tt.noted && !strings.Contains(in, "actions act-3, act-2") {
				t.Fatalf("pending input %q, %v; want the note of what was undone: %v", in, err, tt.noted)
			}
			exec("DROP TRIGGER fail_resume")
			if tt.noted {
				// The operator answers: the job goes on, told of the undo.
				if ok, err := s.AddInput(ctx, "job", "go on", true, time.Now()); err != nil || !ok {
					t.Fatalf("the operator's answer: %v, %v", ok, err)
				}
				in, err = s.PendingInput(ctx, "job")
				if err != nil || strings.Count(in, "restarted the job") != 1 || !strings.Contains(in, "go on") {
					t.Fatalf("pending input %q, %v; want the note and the answer", in, err)
				}
			} else {
				// A second resume queues the job with its note, the only one.
				if _, err := resumeRuntime(s, &undoer{}).ResumeFrom(ctx, "job", "work-complete-1"); err != nil {
					t.Fatalf("the second ResumeFrom: %v", err)
				}
				in, err = s.PendingInput(ctx, "job")
				if err != nil || strings.Count(in, "restarted the job") != 1 {
					t.Fatalf("pending input %q, %v; want one note, the second resume's", in, err)
				}
			}
			if j := mustGet(t, ctx, s, "job"); j.Status != Pending {
				t.Fatalf("job %s, want %s", j.Status, Pending)
			}
		})
	}
}

// cancelRecorder is a Model that only records the jobs CancelJob is
// called for, with their records.
type cancelRecorder struct {
	mu       sync.Mutex
	canceled []string
}

func (m *cancelRecorder) Complete(context.Context, Prompt) (*Completion, error) {
	return nil, errors.New("cancelRecorder: no Complete")
}

func (m *cancelRecorder) CancelJob(_ context.Context, job string, sent []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.canceled = append(m.canceled, job+": "+string(sent))
	return nil
}

var _ JobCanceler = (*cancelRecorder)(nil)

// A job rewound to a checkpoint ends the work its model started elsewhere
// (a delegate's task, whose history holds the steps undone), once, and its
// next step is given no record of it: it opens new work, told what the
// job's model is told after the rewind. Before, the rewound job's next
// step continued the old work, whose context disagreed with the node's.
func TestResumeCancelsTheWorkElsewhere(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		resumable(t, ctx, s)
		if err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE agent_jobs SET model_sent = 'the task of the undone steps', model_sent_answered = 1`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		m := &cancelRecorder{}
		r := resumeRuntime(s, &undoer{})
		r.cfg.Model = m
		if _, err := r.ResumeFrom(ctx, "job", "work-complete-1"); err != nil {
			t.Fatalf("ResumeFrom: %v", err)
		}
		r.wg.Wait()
		r.cancelLeft(ctx)
		r.wg.Wait()
		if want := []string{"job: the task of the undone steps"}; !slices.Equal(m.canceled, want) {
			t.Fatalf("CancelJob calls %q; want %q", m.canceled, want)
		}
		if _, _, sent, _, err := s.StepInput(ctx, "job"); err != nil || sent.Record != nil {
			t.Fatalf("the next step is given the record %q (%v); want none", sent.Record, err)
		}
	})
}
