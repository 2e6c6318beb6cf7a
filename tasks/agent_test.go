package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// stubAgent answers Take with err (a unit test's fake).
type stubAgent struct{ err error }

func (a *stubAgent) Take(context.Context, *Task) error { return a.err }

// What the Service makes of an agent's answer to a message without
// proposals: a refusal fails a task nothing would work on; the agent's
// own failure fails a new task, and leaves a continued one as it is, the
// message in its history, which answers the request (see Committed).
func TestDelegate(t *testing.T) {
	ctx := context.Background()
	text := func(id, taskID string) []byte {
		p := `{"message":{"messageId":"` + id + `","role":"user","parts":[{"text":"hi"}]}`
		if taskID != "" {
			p += `,"taskId":"` + taskID + `"`
		}
		return []byte(p + `}`)
	}
	for _, tc := range []struct {
		name      string
		err       error
		newState  State  // a new task
		nextState State  // a continued task that was working
		nextErr   bool   // the continued message's request fails (none does)
		note      string // in the failed task's status
	}{
		{"taken", nil, StateSubmitted, StateWorking, false, ""},
		{"refused", &Refusal{Reason: "no agent here"}, StateFailed, StateFailed, false, "no agent here"},
		{"agent failure", errors.New("database down"), StateFailed, StateWorking, false, "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := &stubAgent{}
			svc := NewService(NewMemoryStore(MemoryStoreOptions{}), ServiceOptions{Agent: ag})
			ag.err = tc.err
			created, err := sendJSON(ctx, svc, "alice", text("m1", ""))
			if err != nil || created.Status.State != tc.newState || !strings.Contains(created.Status.Message, tc.note) {
				t.Fatalf("new task: %v %v", created, err)
			}
			// A task the agent took and works on.
			ag.err = nil
			live, err := sendJSON(ctx, svc, "alice", text("m2", ""))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Transition(ctx, live.ID, StateWorking, "working"); err != nil {
				t.Fatal(err)
			}
			ag.err = tc.err
			next, err := sendJSON(ctx, svc, "alice", text("m3", live.ID))
			if (err != nil) != tc.nextErr {
				t.Fatalf("continued: err %v", err)
			}
			got, _ := svc.Task(ctx, live.ID)
			if got.Status.State != tc.nextState || len(got.History) != 2 {
				t.Fatalf("continued task: %s with %d messages (answer %v)", got.Status.State, len(got.History), next)
			}
		})
	}
}

// screeningAgent refuses every new task before it is stored (Screener),
// and counts the calls to Take.
type screeningAgent struct{ takes int }

func (a *screeningAgent) Take(context.Context, *Task) error {
	a.takes++
	return &Refusal{Reason: "no agent here"}
}

func (a *screeningAgent) Screen() *Refusal { return &Refusal{Reason: "no agent here"} }

// An agent that refuses every new task before it is stored has it
// created failed: one write and one event (version 1), no Take; a task
// with proposals is not screened, and a continued task still goes
// through Take.
func TestScreenedTaskCreatedFailed(t *testing.T) {
	ctx := context.Background()
	ag := &screeningAgent{}
	store := NewMemoryStore(MemoryStoreOptions{})
	svc := NewService(store, ServiceOptions{Agent: ag})
	created, err := sendJSON(ctx, svc, "alice", []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if created.Status.State != StateFailed || created.Status.Message != "no agent here" || created.Version != 1 || ag.takes != 0 {
		t.Fatalf("new task %s %q at version %d after %d takes; want failed with the reason at version 1, no take",
			created.Status.State, created.Status.Message, created.Version, ag.takes)
	}
	evs, err := store.Events(ctx, created.ID, 0)
	if err != nil || len(evs) != 1 || evs[0].Version != 1 {
		t.Fatalf("events %+v, %v; want the creation's alone", evs, err)
	}
	if st := evs[0].Status; st == nil || st.State != StateFailed || !evs[0].Final() {
		t.Fatalf("creation event %+v; want the final failed status", evs[0])
	}
	p, err := sendJSON(ctx, svc, "alice", []byte(proposalMessage(writeProposal)))
	if err != nil || p.Status.State == StateFailed {
		t.Fatalf("a proposal's task screened: %v, %v", p, err)
	}
	if _, err := sendJSON(ctx, svc, "alice", []byte(`{"message":{"messageId":"m2","role":"user","parts":[{"text":"and?"}]},"taskId":"`+p.ID+`"}`)); err != nil || ag.takes != 1 {
		t.Fatalf("continued task: %v after %d takes; want Take asked once", err, ag.takes)
	}
}
