package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

const thinkAnswer = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"THINK","args":{}}`

// steppedJob is a job of the store on dsn whose steps step writes, one
// at a time, as the runtime does: a THINK that goes on, or with last a
// FINISH that ends the job in success.
type steppedJob struct {
	st *agent.Store
	j  *agent.Job
	t0 time.Time
}

func newSteppedJob(t *testing.T, dsn string) *steppedJob {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: "stepped", Requester: "bc1p-requester", Description: "x", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	return &steppedJob{st: st, j: j, t0: t0}
}

func (s *steppedJob) step(t *testing.T, last bool) {
	t.Helper()
	i := s.j.NextSeq
	msgs := []agent.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "task"}}
	if i > 0 {
		msgs = append(msgs, agent.ChatMessage{Role: "assistant", Content: thinkAnswer}, agent.ChatMessage{Role: "user", Content: "thought"})
	}
	it := &agent.Interaction{Sequence: i, Timestamp: s.t0.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
		Request:     agent.Request{Messages: msgs, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
		Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK", RawResponse: thinkAnswer, NewStatus: agent.Running},
		Observation: &agent.Observation{Outcome: agent.ObsCompleted, Text: "thought"}}
	s.j.Status = agent.Running
	if last {
		it.Response.Action, it.Response.RawResponse, it.Response.NewStatus = "FINISH", finishAnswer, agent.Success
		s.j.Status = agent.Success
	}
	s.j.NextSeq, s.j.Steps = i+1, i+1
	if err := s.st.Write(context.Background(), agent.Save{Job: s.j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
}

func eachDB(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, testdb.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, testdb.Postgres(t)) })
}

// A history printed while its job goes on (job history streams it: it
// reads it once to check it, then again to print it) is the history of
// one moment: the job's status and the interactions it had then. Before,
// the steps the job took between the readings were printed under the
// status read first: a job that ended meanwhile printed as RUNNING with
// a last step that ended it, a history that does not replay.
func TestHistoryStreamedAsTheJobGoesOn(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := newSteppedJob(t, dsn)
		for range 3 {
			s.step(t, false)
		}
		var (
			h   *agent.History
			its []agent.Interaction
		)
		err := s.st.StreamHistory(ctx, s.j.TaskID, func(head *agent.History) error {
			h = head
			s.step(t, true) // the job's last step, between the readings
			return nil
		}, func(it *agent.Interaction) error {
			its = append(its, *it)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		h.Interactions = its
		if h.Status != agent.Running || len(its) != 3 {
			t.Errorf("printed %s with %d interactions; want RUNNING with the 3 it had", h.Status, len(its))
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Errorf("the printed history does not replay: %v", err)
		}
		// Read again, it is the job's whole history.
		var n int
		if err := s.st.StreamHistory(ctx, s.j.TaskID, func(h *agent.History) error {
			if h.Status != agent.Success {
				t.Errorf("status %s; want SUCCESS", h.Status)
			}
			return nil
		}, func(*agent.Interaction) error { n++; return nil }); err != nil || n != 4 {
			t.Errorf("read again: %d interactions, %v; want 4", n, err)
		}
	})
}

// A decision handed to the job again from the executor's record (the
// restart's reconcile, when the node stopped after the step had its
// outcome) keeps who decided and when the job was first given it: the
// record does not name the decider.
func TestDecisionHandedAgainKeepsWhoDecided(t *testing.T) {
	eachDecision(t, func(t *testing.T, r *rig, task *tasks.Task, approve bool, diff string) {
		ctx := context.Background()
		first := lastObservation(t, r, task.ID)
		acts, err := r.exec.Actions(ctx, task.ID)
		if err != nil || len(acts) == 0 {
			t.Fatalf("actions: %v %v", acts, err)
		}
		again := acts[len(acts)-1].Result()
		if again.DecidedBy != "" {
			t.Fatalf("the record's result names the decider %q: the test is moot", again.DecidedBy)
		}
		if _, err := decider(t, r, nil).Decided(ctx, task.ID, again, approve, diff); err != nil {
			t.Fatalf("Decided again: %v", err)
		}
		o := lastObservation(t, r, task.ID)
		if o.DecidedBy != executor.Host || first.DecidedAt == nil || o.DecidedAt == nil || !o.DecidedAt.Equal(*first.DecidedAt) ||
			o.HeldReason != first.HeldReason || o.HeldReason == "" {
			t.Errorf("handed again: decided by %q at %v, held %q; want %q at %v, held %q", o.DecidedBy, o.DecidedAt, o.HeldReason,
				executor.Host, first.DecidedAt, first.HeldReason)
		}
	})
}

func lastObservation(t *testing.T, r *rig, taskID string) agent.Observation {
	t.Helper()
	h, err := r.store.History(context.Background(), taskID)
	if err != nil || len(h.Interactions) == 0 {
		t.Fatalf("history: %v", err)
	}
	o := h.Interactions[len(h.Interactions)-1].Observation
	if o == nil {
		t.Fatal("no observation")
	}
	return *o
}

// A history partly archived, partly live, reads one interaction at a
// time (EachInteraction, StreamHistory, ReplayJob) exactly as whole
// (Interactions), each call's messages rebuilt across the archive's end;
// its newest live step deleted, or the live history deleted whole, it
// fails to read every way.
func TestHistoryAcrossTheArchiveStreamed(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		h, _ := fourSteps(t, r)
		id := h.JobID
		if _, err := r.store.Archive(ctx, id, "", 1, false); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.Archive(ctx, id, "", 3, false); err != nil {
			t.Fatal(err)
		}
		whole, err := r.store.Interactions(ctx, id)
		if err != nil || len(whole) != 4 {
			t.Fatalf("Interactions: %d, %v", len(whole), err)
		}
		var streamed []agent.Interaction
		if err := r.store.StreamHistory(ctx, id, func(*agent.History) error { return nil }, func(it *agent.Interaction) error {
			streamed = append(streamed, *it)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(whole)
		b, _ := json.Marshal(streamed)
		if !bytes.Equal(a, b) {
			t.Errorf("streamed:\n%s\nwant, as read whole:\n%s", b, a)
		}
		if err := r.store.ReplayJob(ctx, id, agent.NewReplayer(64<<10)); err != nil {
			t.Errorf("ReplayJob: %v", err)
		}
		r.sqlExec(t, `DELETE FROM agent_interactions WHERE seq = 3`)
		if _, err := r.store.History(ctx, id); !errors.Is(err, agent.ErrHistoryMismatch) {
			t.Errorf("History: %v; want ErrHistoryMismatch", err)
		}
		if _, err := r.store.CheckHistory(ctx, id); !errors.Is(err, agent.ErrHistoryMismatch) {
			t.Errorf("CheckHistory: %v; want ErrHistoryMismatch", err)
		}
		if err := r.store.ReplayJob(ctx, id, agent.NewReplayer(64<<10)); !errors.Is(err, agent.ErrHistoryMismatch) {
			t.Errorf("ReplayJob: %v; want ErrHistoryMismatch", err)
		}
		called := false
		if err := r.store.StreamHistory(ctx, id, func(*agent.History) error { called = true; return nil },
			func(*agent.Interaction) error { return nil }); !errors.Is(err, agent.ErrHistoryMismatch) || called {
			t.Errorf("StreamHistory: %v, head called %v; want ErrHistoryMismatch before the head", err, called)
		}
	})
}

// The job's history rotates (its runtime archives it) while the history
// is read, between its archive and its live interactions: it still
// reads whole and in order. Before, the live history then started past
// the archive read, and the reading failed as tampered with.
func TestHistoryRotatedAsItIsRead(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		h, _ := fourSteps(t, r)
		id := h.JobID
		if _, err := r.store.Archive(ctx, id, "", 1, false); err != nil {
			t.Fatal(err)
		}
		want, err := r.store.Interactions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []agent.Interaction
		err = r.store.EachInteraction(ctx, id, func(it *agent.Interaction) error {
			got = append(got, *it)
			if it.Sequence == 0 {
				// The archive is read: the runtime rotates.
				if _, err := r.store.Archive(ctx, id, "", 3, false); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("EachInteraction: %v", err)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if !bytes.Equal(a, b) {
			t.Errorf("read as it rotated:\n%s\nwant\n%s", b, a)
		}
	})
}
