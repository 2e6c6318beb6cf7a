package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A held action's step keeps, once an operator decided it, why the
// policy held it, who decided and when: before, the decision's
// observation was written over the hold's, and the history no longer
// said that the step was held, by which rule, nor who let it through.
func TestHistoryKeepsTheHoldAndWhoDecided(t *testing.T) {
	eachDecision(t, func(t *testing.T, r *rig, task *tasks.Task, approve bool, _ string) {
		h, err := r.store.History(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		o := h.Interactions[len(h.Interactions)-1].Observation
		want := map[bool]string{true: agent.ObsApproved, false: agent.ObsDenied}[approve]
		if o == nil || o.Outcome != want {
			t.Fatalf("observation %+v; want %s", o, want)
		}
		if !strings.Contains(o.HeldReason, `policy "destructive"`) {
			t.Errorf("held_reason %q; want the policy that held the action", o.HeldReason)
		}
		if o.DecidedBy != executor.Host {
			t.Errorf("decided_by %q; want %q", o.DecidedBy, executor.Host)
		}
		if o.DecidedAt == nil || o.DecidedAt.IsZero() {
			t.Errorf("decided_at %v; want the decision's time", o.DecidedAt)
		}
		validHistory(t, r, task.ID)
	})
}

// fourSteps runs a job of four model calls (WRITE_FILE, READ_FILE,
// THINK, FINISH) against a scripted OpenAI-compatible server and
// returns its history and the server.
func fourSteps(t *testing.T, r *rig) (*agent.History, *llmtest.Server) {
	t.Helper()
	srv := llmtest.New(t)
	srv.Push(llmtest.Text(proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "hello"})),
		llmtest.Text(proposalJSON("READ_FILE", map[string]any{"path": "/sandbox/a.txt"})),
		llmtest.Text(proposalJSON("THINK", map[string]any{})),
		llmtest.Text(finishAnswer))
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "write a.txt")
	r.completes(t, nil, m, task.ID)
	h, err := r.store.History(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Interactions) != 4 {
		t.Fatalf("%d interactions; want 4", len(h.Interactions))
	}
	return h, srv
}

// edited is h exported as JSON (what `job history` prints), changed by
// edit on its generic form, and read back (what `job replay --file`
// reads).
func edited(t *testing.T, h *agent.History, edit func(its []any)) *agent.History {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	edit(v["interactions"].([]any))
	if b, err = json.Marshal(v); err != nil {
		t.Fatal(err)
	}
	out := new(agent.History)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func obj(v any, path ...string) map[string]any {
	m := v.(map[string]any)
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

// A real job's exported history replays from the history alone, without
// a model call, and each kind of tampering with the export fails the
// replay naming the step: a changed observation, a changed message sent,
// a changed messages hash, a removed step, two steps swapped. Before, an
// observation whose text was changed and a changed message replayed as
// consistent, the export carrying no hash of the messages sent.
func TestReplayOfAnExportDetectsTampering(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	h, srv := fourSteps(t, r)
	calls := srv.Calls()
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Fatalf("replay of the stored history: %v", err)
	}
	// The export as `job history` prints it, read back as `job replay
	// --file` reads it: it replays, and prints byte for byte the same.
	printed, _ := json.MarshalIndent(h, "", "  ")
	back := new(agent.History)
	if err := json.Unmarshal(printed, back); err != nil {
		t.Fatal(err)
	}
	if err := agent.Replay(back, 64<<10); err != nil {
		t.Fatalf("replay of the export as printed: %v", err)
	}
	again, _ := json.MarshalIndent(back, "", "  ")
	if !bytes.Equal(printed, again) {
		t.Errorf("the export read back prints otherwise:\n%s\nwant\n%s", again, printed)
	}
	validHistory(t, r, h.JobID)
	if srv.Calls() != calls {
		t.Errorf("replay called the model: %d calls, %d before", srv.Calls(), calls)
	}
	for _, c := range []struct {
		name string
		edit func(its []any)
		seq  int // the interaction the error must name
	}{
		{"changed observation", func(its []any) {
			o := obj(its[1], "observation")
			o["text"] = strings.Replace(o["text"].(string), "hello", "HELLO", 1)
		}, 1},
		{"changed message sent", func(its []any) {
			msgs := obj(its[2], "request")["messages"].([]any)
			m := msgs[len(msgs)-1].(map[string]any)
			m["content"] = m["content"].(string) + " "
		}, 2},
		{"changed hash", func(its []any) {
			obj(its[2], "request")["messages_sha256"] = strings.Repeat("0", 64)
		}, 2},
		{"removed step", func(its []any) {
			copy(its[2:], its[3:])
			its[3] = its[2] // keeps the length; the sequence is what counts
		}, 2},
		{"reordered steps", func(its []any) { its[1], its[2] = its[2], its[1] }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := agent.Replay(edited(t, h, c.edit), 64<<10)
			var re *agent.ReplayError
			if !errors.As(err, &re) {
				t.Fatalf("replay: %v; want a *ReplayError", err)
			}
			if re.Sequence != c.seq {
				t.Errorf("replay: %v; want it to name interaction %d", err, c.seq)
			}
		})
	}
}

// A history whose newest stored step was deleted fails to read, naming
// the missing step: before, it read (and replayed) as a shorter history.
func TestHistoryMissingItsLastStepFails(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	h, _ := fourSteps(t, r)
	r.sqlExec(t, `UPDATE agent_jobs SET status = 'RUNNING'`) // not ended: the status does not give it away
	r.sqlExec(t, `DELETE FROM agent_interactions WHERE seq = 3`)
	_, err := r.store.History(context.Background(), h.JobID)
	if !errors.Is(err, agent.ErrHistoryMismatch) || !strings.Contains(err.Error(), "interaction 3") {
		t.Fatalf("history: %v; want ErrHistoryMismatch naming interaction 3", err)
	}
}
