package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// storeT0 is the tests' clock: every time is explicit, nothing sleeps.
var storeT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return storeT0.Add(d) }

// eachStore runs fn on a fresh Store of each dialect (PostgreSQL when
// SNAPNODE_TEST_POSTGRES is set).
func eachStore(t *testing.T, fn func(t *testing.T, ctx context.Context, s *Store)) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		fn(t, t.Context(), openTestStore(t, dsn))
	})
}

// openTestDB opens the database of dsn, closed when the test ends.
func openTestDB(t *testing.T, dsn string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(t.Context(), dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// openTestStore opens the Store of the database of dsn (openTestDB), its
// migrations applied.
func openTestStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := OpenStore(t.Context(), openTestDB(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// storeJob is a new job as Queue.Take makes it, created at created.
func storeJob(id string, status Status, created time.Time) *Job {
	return &Job{TaskID: id, Requester: "bc1p-" + id, Description: "job " + id, Status: status, Phase: "work",
		RecoverySeq: -1, CreatedAt: created, UpdatedAt: created}
}

func mustCreate(t *testing.T, ctx context.Context, s *Store, jobs ...*Job) {
	t.Helper()
	for _, j := range jobs {
		ok, err := s.Create(ctx, j)
		if err != nil || !ok {
			t.Fatalf("Create(%s) = %v, %v", j.TaskID, ok, err)
		}
	}
}

func mustGet(t *testing.T, ctx context.Context, s *Store, id string) *Job {
	t.Helper()
	j, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

// storeInteraction is interaction seq of a job, its observation carrying
// text.
func storeInteraction(seq int, text string) *Interaction {
	return &Interaction{Sequence: seq, Timestamp: at(time.Duration(seq) * time.Second), StateBefore: Running,
		WorkspacePath: "/sandbox/",
		Request: Request{Messages: []ChatMessage{{Role: RoleSystem, Content: "system"}, {Role: RoleUser, Content: "task"}},
			Metadata: RequestMetadata{Role: "Worker", Phase: "work", Model: "test-model", Temperature: 0.2, MaxTokens: 256}},
		Response: Response{Status: ResponseSuccess, Kind: KindProposal, Action: "READ_FILE",
			RawResponse: answerProposal(stuckID(seq), "read it", "READ_FILE", `{"path":"/sandbox/a.md"}`),
			NewStatus:   Running, ExecutionTimeSeconds: 0.5, CostUSD: 0.0001, PromptTokens: 100, CompletionTokens: 20},
		Observation: &Observation{Outcome: ObsCompleted, ActionID: fmt.Sprintf("act-%d", seq),
			Output: json.RawMessage(`{"status":"success","action":"READ_FILE","result":{"content":"alpha"}}`),
			Text:   text},
	}
}

// bodySize is the size of it as the store writes it.
func bodySize(t *testing.T, it *Interaction) int64 {
	t.Helper()
	b, err := encodeInteraction(it)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

func TestStoreOpenTwice(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s1, err := OpenStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, ctx, s1, storeJob("kept", Pending, storeT0))
		s2, err := OpenStore(ctx, db) // the migrations are applied once
		if err != nil {
			t.Fatalf("second OpenStore: %v", err)
		}
		mustGet(t, ctx, s2, "kept")
	})
}

func TestStoreCreate(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		j := storeJob("t1", Pending, storeT0)
		j.Steps, j.CostCents, j.Seconds, j.PromptTokens, j.CompletionTokens = 3, 1.25, 4.5, 1000, 200
		j.LeaseHolder, j.LeaseUntil, j.PendingInput, j.Reason = "h", at(time.Minute), "guidance", "why"
		j.UpdatedAt = at(time.Second + 123*time.Microsecond)
		mustCreate(t, ctx, s, j)
		t.Run("round trip", func(t *testing.T) {
			if got := mustGet(t, ctx, s, "t1"); !reflect.DeepEqual(got, j) {
				t.Errorf("Get:\n got  %+v\n want %+v", got, j)
			}
		})
		t.Run("idempotent", func(t *testing.T) {
			again := storeJob("t1", Running, at(time.Hour))
			again.Description = "another description"
			ok, err := s.Create(ctx, again)
			if err != nil || ok {
				t.Fatalf("second Create = %v, %v; want false, nil", ok, err)
			}
			if got := mustGet(t, ctx, s, "t1"); !reflect.DeepEqual(got, j) {
				t.Errorf("the second Create changed the job:\n got  %+v\n want %+v", got, j)
			}
		})
		t.Run("missing", func(t *testing.T) {
			if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNoJob) {
				t.Errorf("Get(nope) = %v; want ErrNoJob", err)
			}
			if _, err := s.History(ctx, "nope"); !errors.Is(err, ErrNoJob) {
				t.Errorf("History(nope) = %v; want ErrNoJob", err)
			}
		})
	})
}

func TestStoreRunnable(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		now := at(10 * time.Minute)
		lapsed := storeJob("lapsed", Running, at(0))
		lapsed.LeaseHolder, lapsed.LeaseUntil = "gone", now.Add(-time.Microsecond)
		live := storeJob("live", Running, at(1*time.Second))
		live.LeaseHolder, live.LeaseUntil = "here", now.Add(time.Minute)
		edge := storeJob("edge", Running, at(2*time.Second))
		edge.LeaseHolder, edge.LeaseUntil = "here", now // lapses after now, not at it
		claimed := storeJob("claimed", Pending, at(3*time.Second))
		claimed.LeaseHolder, claimed.LeaseUntil = "here", now.Add(time.Minute)
		mustCreate(t, ctx, s,
			storeJob("p-new", Pending, at(5*time.Second)),
			storeJob("p-old", Pending, at(4*time.Second)),
			storeJob("p-tie-b", Pending, at(6*time.Second)),
			storeJob("p-tie-a", Pending, at(6*time.Second)),
			lapsed, live, edge, claimed,
			storeJob("draft", Draft, at(0)),
			storeJob("reviewing", Reviewing, at(0)),
			storeJob("held", InterventionRequired, at(0)),
			storeJob("done", Success, at(0)),
			storeJob("canceled", Canceled, at(0)),
			storeJob("halted", HaltedCost, at(0)),
		)
		ids := func(cs []Candidate) []string {
			var out []string
			for _, c := range cs {
				out = append(out, c.TaskID)
				if c.Requester != "bc1p-"+c.TaskID {
					t.Errorf("candidate %s has requester %q", c.TaskID, c.Requester)
				}
			}
			return out
		}
		tests := []struct {
			name  string
			now   time.Time
			limit int
			want  []string
		}{
			// A job in its review phase is runnable as a running one is.
			{"oldest first", now, 100, []string{"lapsed", "reviewing", "p-old", "p-new", "p-tie-a", "p-tie-b"}},
			{"limit", now, 2, []string{"lapsed", "reviewing"}},
			{"a microsecond later", now.Add(time.Microsecond), 100, []string{"lapsed", "reviewing", "edge", "p-old", "p-new", "p-tie-a", "p-tie-b"}},
			{"after every lease", now.Add(time.Hour), 100, []string{"lapsed", "reviewing", "live", "edge", "claimed", "p-old", "p-new", "p-tie-a", "p-tie-b"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cs, err := s.Runnable(ctx, tt.now, 100, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(cs); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Runnable = %v; want %v", got, tt.want)
				}
			})
		}
	})
}

func TestStoreClaimRace(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		const jobs = 16
		for i := range jobs {
			mustCreate(t, ctx, s, storeJob(fmt.Sprintf("race-%02d", i), Pending, at(time.Duration(i))))
		}
		for i := range jobs {
			id := fmt.Sprintf("race-%02d", i)
			holders := []string{"holder-a", "holder-b"}
			won := make([]bool, len(holders))
			errs := make([]error, len(holders))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for k, h := range holders {
				wg.Go(func() {
					<-start
					won[k], errs[k] = s.Claim(ctx, id, h, at(time.Minute), at(2*time.Minute))
				})
			}
			close(start)
			wg.Wait()
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("%s: Claim errors %v", id, errs)
			}
			if won[0] == won[1] {
				t.Fatalf("%s: claims won %v; want exactly one", id, won)
			}
			winner := holders[0]
			if won[1] {
				winner = holders[1]
			}
			if j := mustGet(t, ctx, s, id); j.LeaseHolder != winner || !j.LeaseUntil.Equal(at(2*time.Minute)) {
				t.Fatalf("%s: held by %q until %v; want %q until %v", id, j.LeaseHolder, j.LeaseUntil, winner, at(2*time.Minute))
			}
		}
	})
}

func TestStoreLease(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("job", Pending, storeT0))
		runnable := func(now time.Time) bool {
			t.Helper()
			cs, err := s.Runnable(ctx, now, 100, 10)
			if err != nil {
				t.Fatal(err)
			}
			return len(cs) == 1
		}
		// Each step is one call at an explicit time, in order.
		steps := []struct {
			name string
			do   func() (bool, error)
			want bool
		}{
			{"runnable when new", func() (bool, error) { return runnable(at(0)), nil }, true},
			{"a claims", func() (bool, error) { return s.Claim(ctx, "job", "a", at(0), at(30*time.Second)) }, true},
			{"not runnable while held", func() (bool, error) { return runnable(at(10 * time.Second)), nil }, false},
			{"b cannot claim", func() (bool, error) { return s.Claim(ctx, "job", "b", at(10*time.Second), at(40*time.Second)) }, false},
			{"a cannot claim again", func() (bool, error) { return s.Claim(ctx, "job", "a", at(10*time.Second), at(40*time.Second)) }, false},
			{"b cannot renew", func() (bool, error) { return s.Renew(ctx, "job", "b", at(90*time.Second)) }, false},
			{"a renews", func() (bool, error) { return s.Renew(ctx, "job", "a", at(60*time.Second)) }, true},
			{"held until the renewal", func() (bool, error) { return runnable(at(50 * time.Second)), nil }, false},
			{"b cannot claim before it lapses", func() (bool, error) { return s.Claim(ctx, "job", "b", at(60*time.Second), at(90*time.Second)) }, false},
			{"runnable once lapsed", func() (bool, error) { return runnable(at(61 * time.Second)), nil }, true},
			{"b claims the lapsed job", func() (bool, error) { return s.Claim(ctx, "job", "b", at(61*time.Second), at(91*time.Second)) }, true},
			{"a cannot renew any more", func() (bool, error) { return s.Renew(ctx, "job", "a", at(120*time.Second)) }, false},
			{"a's release does nothing", func() (bool, error) {
				return true, s.Release(ctx, "job", "a")
			}, true},
			{"still b's", func() (bool, error) { return runnable(at(62 * time.Second)), nil }, false},
			{"b releases", func() (bool, error) { return true, s.Release(ctx, "job", "b") }, true},
			{"runnable at once", func() (bool, error) { return runnable(at(62 * time.Second)), nil }, true},
			{"b cannot renew a released job", func() (bool, error) { return s.Renew(ctx, "job", "b", at(120*time.Second)) }, false},
		}
		for _, st := range steps {
			got, err := st.do()
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if got != st.want {
				t.Fatalf("%s: %v; want %v", st.name, got, st.want)
			}
		}
		if j := mustGet(t, ctx, s, "job"); j.LeaseHolder != "" || !j.LeaseUntil.IsZero() || j.Status != Pending {
			t.Errorf("after the release: holder %q until %v, %s; want no lease, PENDING", j.LeaseHolder, j.LeaseUntil, j.Status)
		}
	})
}

func TestStoreClaimStatuses(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		for _, st := range Statuses() {
			t.Run(string(st), func(t *testing.T) {
				mustCreate(t, ctx, s, storeJob("claim-"+string(st), st, storeT0))
				won, err := s.Claim(ctx, "claim-"+string(st), "h", at(time.Second), at(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if want := st == Pending || st == Running || st == Reviewing; won != want {
					t.Errorf("Claim of a %s job = %v; want %v", st, won, want)
				}
			})
		}
		if won, err := s.Claim(ctx, "missing", "h", at(time.Second), at(time.Minute)); err != nil || won {
			t.Errorf("Claim of a missing job = %v, %v; want false, nil", won, err)
		}
	})
}

func TestStoreWriteGuards(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("job", Pending, storeT0))
		if ok, err := s.Claim(ctx, "job", "a", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		before := mustGet(t, ctx, s, "job")
		tests := []struct {
			name   string
			holder string
			expect Status
		}{
			{"another holder", "b", ""},
			{"another status", "", Running},
			{"holder right, status wrong", "a", Success},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				j := mustGet(t, ctx, s, "job")
				j.Status, j.Steps, j.NextSeq, j.Reason, j.UpdatedAt = Running, 9, 1, "moved", at(time.Second)
				err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(0, "seen"),
					Recovery: &RecoveryPoint{CheckpointID: "cp", Sequence: 0}, Holder: tt.holder, Expect: tt.expect})
				if !errors.Is(err, ErrLeaseLost) {
					t.Fatalf("Write = %v; want ErrLeaseLost", err)
				}
				got := mustGet(t, ctx, s, "job")
				if !reflect.DeepEqual(got, before) {
					t.Errorf("the refused write changed the job:\n got  %+v\n want %+v", got, before)
				}
				if its, err := s.Interactions(ctx, "job"); err != nil || len(its) != 0 {
					t.Errorf("Interactions = %d, %v; want none stored", len(its), err)
				}
				if rps, err := s.RecoveryPoints(ctx, "job"); err != nil || len(rps) != 0 {
					t.Errorf("RecoveryPoints = %d, %v; want none stored", len(rps), err)
				}
			})
		}
		t.Run("holder", func(t *testing.T) {
			j := mustGet(t, ctx, s, "job")
			j.Status, j.NextSeq, j.UpdatedAt = Running, 1, at(time.Second)
			if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(0, "seen"), Holder: "a", Expect: Pending}); err != nil {
				t.Fatal(err)
			}
			got := mustGet(t, ctx, s, "job")
			if got.Status != Running || got.NextSeq != 1 || got.LeaseHolder != "a" {
				t.Errorf("job after the write: %+v", got)
			}
			if its, _ := s.Interactions(ctx, "job"); len(its) != 1 {
				t.Errorf("%d interactions stored; want 1", len(its))
			}
		})
		t.Run("unguarded", func(t *testing.T) {
			j := mustGet(t, ctx, s, "job")
			j.Reason = "anyone"
			if err := s.Write(ctx, Save{Job: j}); err != nil {
				t.Fatal(err)
			}
			if got := mustGet(t, ctx, s, "job"); got.Reason != "anyone" {
				t.Errorf("Reason = %q", got.Reason)
			}
		})
		t.Run("lapsed lease taken by another", func(t *testing.T) {
			if ok, err := s.Claim(ctx, "job", "b", at(2*time.Minute), at(3*time.Minute)); err != nil || !ok {
				t.Fatalf("Claim by b = %v, %v", ok, err)
			}
			j := mustGet(t, ctx, s, "job")
			j.LeaseHolder = "a" // a's stale copy
			if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(1, "late"), Holder: "a"}); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("Write by a = %v; want ErrLeaseLost", err)
			}
			if its, _ := s.Interactions(ctx, "job"); len(its) != 1 {
				t.Errorf("%d interactions stored; want still 1", len(its))
			}
			if got := mustGet(t, ctx, s, "job"); got.LeaseHolder != "b" {
				t.Errorf("held by %q; want b", got.LeaseHolder)
			}
		})
	})
}

func TestStoreHistoryBytes(t *testing.T) {
	tests := []struct {
		name   string
		bodies []string // the observation texts written, in order, all as sequence 0
	}{
		{"ascii, longer then shorter", []string{"short", strings.Repeat("long ", 200), "mid"}},
		{"same body twice", []string{"same", "same"}},
		{"non-ASCII", []string{"résumé ✓ naïve", strings.Repeat("é", 300), "ok ✓"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
				mustCreate(t, ctx, s, storeJob("job", Running, storeT0))
				for i, text := range tt.bodies {
					j := mustGet(t, ctx, s, "job")
					it := storeInteraction(0, text)
					j.NextSeq = 1
					if err := s.Write(ctx, Save{Job: j, Interaction: it}); err != nil {
						t.Fatal(err)
					}
					its, err := s.Interactions(ctx, "job")
					if err != nil || len(its) != 1 || its[0].Observation.Text != text {
						t.Fatalf("write %d: %d interactions (%v); want the one, replaced", i, len(its), err)
					}
					got, want := mustGet(t, ctx, s, "job").HistoryBytes, bodySize(t, it)
					if got != want {
						t.Fatalf("write %d: HistoryBytes = %d; want the latest body's %d", i, got, want)
					}
				}
				// A second interaction adds its size.
				j := mustGet(t, ctx, s, "job")
				second := storeInteraction(1, "next")
				if err := s.Write(ctx, Save{Job: j, Interaction: second}); err != nil {
					t.Fatal(err)
				}
				want := bodySize(t, storeInteraction(0, tt.bodies[len(tt.bodies)-1])) + bodySize(t, second)
				if got := mustGet(t, ctx, s, "job").HistoryBytes; got != want {
					t.Errorf("HistoryBytes = %d; want %d for both", got, want)
				}
			})
		})
	}
}

func TestStoreHistory(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("empty", Pending, storeT0), storeJob("job", Running, at(time.Second)))
		t.Run("empty", func(t *testing.T) {
			h, err := s.History(ctx, "empty")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(h)
			if !strings.Contains(string(b), `"interactions":[]`) || !strings.Contains(string(b), `"recovery_points":[]`) {
				t.Errorf("an empty history's JSON %s lacks the empty arrays", b)
			}
			if err := validateJSON(h, "history"); err != nil {
				t.Errorf("empty history: %v", err)
			}
		})

		j := mustGet(t, ctx, s, "job")
		rps := []RecoveryPoint{
			{CheckpointID: "work-complete-1", Sequence: 1, CanResumeFrom: true, ResumePhase: "work",
				RollbackFiles: []string{"/sandbox/a.md"}, Description: "first", Metadata: map[string]any{"evidence_count": 1.0}},
			{CheckpointID: "work-complete-2", Sequence: 2, Description: "second"},
		}
		// Written out of order: the store orders by sequence.
		for _, seq := range []int{2, 0, 1} {
			it := storeInteraction(seq, fmt.Sprintf("observation %d", seq))
			if seq == 1 {
				it.Guidance = "Message from the requester: go on"
				it.Response = Response{Status: ResponseSuccess, Kind: KindAgentResponse, Action: ActionCompleted,
					EvidenceFiles: []string{"/sandbox/a.md"}, SummaryForSupervisor: "done",
					RawResponse: `{"action":"COMPLETED","evidence_files":["/sandbox/a.md"],"summary_for_supervisor":"done"}`,
					NewStatus:   Success}
			}
			if seq == 2 {
				it.Response = Response{Status: ResponseError, Kind: KindAPIError, Error: "model server: HTTP 503", NewStatus: Running}
				it.Observation = nil
			}
			save := Save{Job: j, Interaction: it}
			if seq >= 1 {
				save.Recovery = &rps[seq-1]
			}
			if err := s.Write(ctx, save); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := s.RawInteractions(ctx, "job")
		if err != nil || len(raw) != 3 {
			t.Fatalf("RawInteractions = %d, %v", len(raw), err)
		}
		its := make([]Interaction, len(raw)) // as stored, the history's want
		for i := range its {
			if err := json.Unmarshal(raw[i], &its[i]); err != nil {
				t.Fatal(err)
			}
		}

		t.Run("interactions", func(t *testing.T) {
			got, err := s.Interactions(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range got {
				if it.Sequence != i {
					t.Errorf("interaction %d has sequence %d", i, it.Sequence)
				}
			}
			want0 := storeInteraction(0, "observation 0")
			if b, _ := encodeInteraction(want0); string(raw[0]) != string(b) {
				t.Errorf("raw interaction 0 is %s; want %s", raw[0], b)
			}
			// Read back, it carries the hash of its messages.
			want0.Request.MessagesSHA256 = messagesHash(want0.Request.Messages)
			if !reflect.DeepEqual(got[0], *want0) {
				t.Errorf("interaction 0 read back:\n got  %+v\n want %+v", got[0], *want0)
			}
		})
		t.Run("recovery points", func(t *testing.T) {
			got, err := s.RecoveryPoints(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, rps) {
				t.Errorf("RecoveryPoints:\n got  %+v\n want %+v", got, rps)
			}
		})
		t.Run("recovery point replaced", func(t *testing.T) {
			rp := rps[1]
			rp.Description = "second, again"
			if err := s.Write(ctx, Save{Job: mustGet(t, ctx, s, "job"), Recovery: &rp}); err != nil {
				t.Fatal(err)
			}
			got, err := s.RecoveryPoints(ctx, "job")
			if err != nil || len(got) != 2 || got[1].Description != "second, again" {
				t.Errorf("RecoveryPoints = %+v, %v; want the second replaced", got, err)
			}
			rps[1] = rp
		})
		t.Run("history", func(t *testing.T) {
			h, err := s.History(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			want := &History{JobID: "job", CreatedAt: at(time.Second), Description: "job job", Status: Running,
				Interactions: its, RecoveryPoints: rps}
			if !reflect.DeepEqual(h, want) {
				t.Errorf("History:\n got  %+v\n want %+v", h, want)
			}
			if err := validateJSON(h, "history"); err != nil {
				t.Errorf("History does not validate: %v", err)
			}
		})
		t.Run("other jobs", func(t *testing.T) {
			if its, err := s.Interactions(ctx, "empty"); err != nil || len(its) != 0 {
				t.Errorf("another job's interactions: %d, %v", len(its), err)
			}
		})
	})
}

func TestStoreList(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s,
			storeJob("c", Pending, at(3*time.Second)),
			storeJob("a", Running, at(1*time.Second)),
			storeJob("d", Success, at(4*time.Second)),
			storeJob("b", Pending, at(2*time.Second)),
			storeJob("e", InterventionRequired, at(5*time.Second)),
			storeJob("f", HaltedTime, at(5*time.Second)),
		)
		tests := []struct {
			name     string
			limit    int
			statuses []Status
			want     []string
		}{
			{"all", 0, nil, []string{"a", "b", "c", "d", "e", "f"}},
			{"limit", 2, nil, []string{"a", "b"}},
			{"pending", 0, []Status{Pending}, []string{"b", "c"}},
			{"pending or running", 0, []Status{Pending, Running}, []string{"a", "b", "c"}},
			{"pending or running, limit", 1, []Status{Running, Pending}, []string{"a"}},
			{"terminal", 0, []Status{Success, Canceled, HaltedCost, HaltedTime}, []string{"d", "f"}},
			{"none in status", 0, []Status{Draft}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				jobs, err := s.List(ctx, tt.limit, tt.statuses...)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, j := range jobs {
					got = append(got, j.TaskID)
					if len(tt.statuses) > 0 && !containsStatus(tt.statuses, j.Status) {
						t.Errorf("%s is %s", j.TaskID, j.Status)
					}
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("List = %v; want %v", got, tt.want)
				}
			})
		}
	})
}

func containsStatus(ss []Status, s Status) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// queueTask is a task whose messages say texts.
func queueTask(id string, texts ...string) *tasks.Task {
	t := &tasks.Task{ID: id, Owner: "bc1p-" + id, Status: tasks.Status{State: tasks.StateSubmitted}}
	for _, text := range texts {
		t.History = append(t.History, tasks.Message{MessageID: "m-" + text, Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart(text)}})
	}
	return t
}

func TestQueueTake(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		clock := storeT0
		q := NewQueue(s, func() time.Time { return clock })
		woken := func() bool {
			select {
			case <-q.wake:
				return true
			default:
				return false
			}
		}
		t.Run("new task", func(t *testing.T) {
			if err := q.Take(ctx, queueTask("t1", "summarise notes.md")); err != nil {
				t.Fatal(err)
			}
			want := &Job{TaskID: "t1", Requester: "bc1p-t1", Description: "summarise notes.md", Status: Pending, Phase: "work",
				RecoverySeq: -1, ReviewSeq: -1, Told: 1, CreatedAt: storeT0, UpdatedAt: storeT0, settled: true}
			if got := mustGet(t, ctx, s, "t1"); !reflect.DeepEqual(got, want) {
				t.Errorf("job:\n got  %+v\n want %+v", got, want)
			}
			if !woken() {
				t.Error("Take did not wake the runtime")
			}
		})
		said := []string{"summarise notes.md"} // t1's messages
		followUp := func(t *testing.T, id string, st Status, text string) *Job {
			t.Helper()
			j := mustGet(t, ctx, s, id)
			j.Status = st
			if err := s.Write(ctx, Save{Job: j}); err != nil {
				t.Fatal(err)
			}
			// Held by "h" (Write leaves the lease to Claim and Renew).
			if _, err := s.exec(ctx, "hold", id, `UPDATE agent_jobs SET lease_holder = ?, lease_until = ? WHERE task_id = ?`,
				"h", sqldb.Micros(at(time.Hour)), id); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(time.Second)
			said = append(said, text)
			if err := q.Take(ctx, queueTask(id, said...)); err != nil {
				t.Fatal(err)
			}
			return mustGet(t, ctx, s, id)
		}
		t.Run("follow-up on a job waiting for input", func(t *testing.T) {
			j := followUp(t, "t1", InterventionRequired, "the notes are uploaded")
			if j.Status != Pending || j.LeaseHolder != "" || !j.LeaseUntil.IsZero() {
				t.Errorf("status %s, lease %q until %v; want PENDING and free", j.Status, j.LeaseHolder, j.LeaseUntil)
			}
			if j.PendingInput != "Message from the requester: the notes are uploaded" {
				t.Errorf("PendingInput = %q", j.PendingInput)
			}
			if j.Description != "summarise notes.md" || !j.UpdatedAt.Equal(clock) {
				t.Errorf("description %q, updated %v", j.Description, j.UpdatedAt)
			}
			if cs, _ := s.Runnable(ctx, clock, 100, 10); len(cs) != 1 {
				t.Errorf("the resumed job is not runnable: %v", cs)
			}
		})
		t.Run("follow-up on a running job", func(t *testing.T) {
			j := followUp(t, "t1", Running, "and be brief")
			if j.Status != Running || j.LeaseHolder != "h" {
				t.Errorf("status %s held by %q; want RUNNING, still held", j.Status, j.LeaseHolder)
			}
			want := "Message from the requester: the notes are uploaded\n\nMessage from the requester: and be brief"
			if j.PendingInput != want {
				t.Errorf("PendingInput = %q; want %q", j.PendingInput, want)
			}
		})
		t.Run("follow-up on a finished job", func(t *testing.T) {
			before := mustGet(t, ctx, s, "t1")
			j := followUp(t, "t1", Success, "one more thing")
			if j.Status != Success || j.PendingInput != before.PendingInput {
				t.Errorf("a finished job changed: %+v", j)
			}
		})
		t.Run("long description", func(t *testing.T) {
			long := strings.Repeat("é", 3000)
			if err := q.Take(ctx, queueTask("t2", long)); err != nil {
				t.Fatal(err)
			}
			j := mustGet(t, ctx, s, "t2")
			if len(j.Description) > 2000+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(j.Description, "…")) {
				t.Errorf("description of %d bytes; want the text cut to 2000", len(j.Description))
			}
		})
	})
}

// TestQueueFollowUpWhileRunning follows a follow-up message on a job at
// work (queue.go: "one on a job at work is told to the model at its next
// step") through the writes the runtime makes: its job is the copy it
// loaded when it claimed the job, saved whole under its lease at every
// step (jobRun.saveWith).
func TestQueueFollowUpWhileRunning(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		q := NewQueue(s, func() time.Time { return storeT0 })
		if err := q.Take(ctx, queueTask("t1", "summarise notes.md")); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Claim(ctx, "t1", "rt", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		mine := mustGet(t, ctx, s, "t1") // the runtime's copy (jobRun.start)
		mine.Status = Running
		if err := s.Write(ctx, Save{Job: mine, Holder: "rt"}); err != nil {
			t.Fatal(err)
		}
		// The requester writes while the model thinks.
		if err := q.Take(ctx, queueTask("t1", "summarise notes.md", "and be brief")); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, ctx, s, "t1").PendingInput; got != "Message from the requester: and be brief" {
			t.Fatalf("PendingInput after the follow-up = %q", got)
		}
		// The runtime records its next step.
		mine.Steps, mine.NextSeq = 1, 1
		if err := s.Write(ctx, Save{Job: mine, Interaction: storeInteraction(0, "seen"), Holder: "rt"}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, ctx, s, "t1").PendingInput; got == "" {
			t.Errorf("the follow-up message was lost by the runtime's next save")
		}
	})
}

// TestAddInputKeepsProgress: the queue's input and the runtime's writes
// touch different columns, so neither undoes the other, and a runtime
// write with the lease it read at its claim never shortens a renewed
// lease.
func TestAddInputKeepsProgress(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("t1", Running, storeT0))
		if ok, err := s.Claim(ctx, "t1", "rt", at(0), at(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		rt := mustGet(t, ctx, s, "t1") // the runtime's copy, read at its claim
		if ok, err := s.AddInput(ctx, "t1", "Message from the requester: hi", false, storeT0); err != nil || !ok {
			t.Fatalf("AddInput = %v, %v", ok, err)
		}
		if ok, err := s.Renew(ctx, "t1", "rt", at(2*time.Minute)); err != nil || !ok {
			t.Fatalf("Renew = %v, %v", ok, err)
		}
		rt.Steps, rt.NextSeq = 1, 1
		if err := s.Write(ctx, Save{Job: rt, Interaction: storeInteraction(0, "seen"), Holder: "rt"}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, ctx, s, "t1")
		if got.NextSeq != 1 || got.Steps != 1 || got.HistoryBytes == 0 {
			t.Errorf("the runtime's step: steps %d, next_seq %d, history_bytes %d; want 1, 1, > 0", got.Steps, got.NextSeq, got.HistoryBytes)
		}
		if got.PendingInput != "Message from the requester: hi" {
			t.Errorf("the input was lost by the runtime's write: %q", got.PendingInput)
		}
		if !got.LeaseUntil.Equal(at(2 * time.Minute)) {
			t.Errorf("lease until %v after the runtime's write, want the renewed %v", got.LeaseUntil, at(2*time.Minute))
		}
		// The runtime answers the input it read: it is taken off, what
		// came after stays.
		read, end, _, _, err := s.StepInput(ctx, "t1")
		if err != nil || read != "Message from the requester: hi" {
			t.Fatalf("StepInput = %q, %v", read, err)
		}
		if ok, err := s.AddInput(ctx, "t1", "Message from the requester: and be brief", false, storeT0); err != nil || !ok {
			t.Fatalf("AddInput = %v, %v", ok, err)
		}
		rt.NextSeq = 2
		if err := s.Write(ctx, Save{Job: rt, Interaction: storeInteraction(1, "answered"), Holder: "rt", Consumed: read, ConsumedEnd: end}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, ctx, s, "t1").PendingInput; got != "Message from the requester: and be brief" {
			t.Errorf("pending input after the answer: %q", got)
		}
	})
}

// Text a requester or a model wrote is kept on every database: a NUL,
// which PostgreSQL's text refuses, and bytes that are not UTF-8 become
// U+FFFD; before, a task whose text held a NUL got no job on PostgreSQL,
// and a model's answer holding one failed the job's save.
func TestStoreKeepsAnyText(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		j := storeJob("job", Pending, storeT0)
		j.Description, j.Requester = "write\x00 a.md \xff", "bc1p\x00"
		mustCreate(t, ctx, s, j)
		if ok, err := s.AddInput(ctx, "job", "and\x00 b.md", false, storeT0); err != nil || !ok {
			t.Fatalf("AddInput: %v, %v", ok, err)
		}
		j.Status, j.Reason = InterventionRequired, "stuck on\x00"
		if err := s.Write(ctx, Save{Job: j, Input: "more\x00"}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got := mustGet(t, ctx, s, "job")
		if got.Description != "write\uFFFD a.md \uFFFD" || got.Requester != "bc1p\uFFFD" || got.Reason != "stuck on\uFFFD" ||
			!strings.Contains(got.PendingInput, "and\uFFFD b.md") || !strings.Contains(got.PendingInput, "more\uFFFD") {
			t.Fatalf("job %q by %q, reason %q, input %q", got.Description, got.Requester, got.Reason, got.PendingInput)
		}
	})
}
