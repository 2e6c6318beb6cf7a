package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
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
