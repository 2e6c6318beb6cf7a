package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// failingAgent fails Take while fail is set (the agent's queue
// unwritable): a unit test's fake at the agent seam.
type failingAgent struct {
	fail  atomic.Bool
	taken atomic.Int32 // the Takes that succeeded
}

func (a *failingAgent) Take(context.Context, *tasks.Task) error {
	a.taken.Add(1)
	if a.fail.Load() {
		a.taken.Add(-1)
		return errors.New("agent queue: database is locked")
	}
	return nil
}

// failingRunner fails every run: the executor's own failure.
type failingRunner struct{}

func (failingRunner) Run(context.Context, tasks.Job) (tasks.Outcome, error) {
	return tasks.Outcome{}, errors.New("executor: disk full")
}

// updateFailing fails the store's later writes of a task (Update, Apply)
// while fail is set, Apply alone while failApply is: the state changes
// that follow a task's creation.
type updateFailing struct {
	tasks.Store
	fail, failApply atomic.Bool
}

func (s *updateFailing) Update(ctx context.Context, t *tasks.Task, version int64) (*tasks.Task, error) {
	if s.fail.Load() {
		return nil, errors.New("store: database is locked")
	}
	return s.Store.Update(ctx, t, version)
}

func (s *updateFailing) Apply(ctx context.Context, id string, out tasks.Outcome) (*tasks.Task, []tasks.Event, error) {
	if s.fail.Load() || s.failApply.Load() {
		return nil, nil, errors.New("store: database is locked")
	}
	return s.Store.Apply(ctx, id, out)
}

// A message/send whose task was created, or whose message was added,
// with its replay record, is answered with the task as it stands when a
// step after that commit fails (the agent's Take, the move to working
// before a run, the run's outcome): not 5001, which tells the requester
// to retry the same message when its id is spent already, so that the
// retry would be refused as a duplicate (2006) and the requester never
// learn of its task. The retry of the same message gets the task too,
// marked deduplicated; the task is left for the pass that takes up what
// a failure left behind (Service.Resume).
func TestAnsweredWithTheTaskAfterItsCommit(t *testing.T) {
	r := newClaimRig(t)
	ctx := context.Background()
	const free = `{"messageId":"m1","role":"user","parts":[{"text":"hello"}]}`
	const proposal = `{"messageId":"m1","role":"user","parts":[{"data":{"schema_version":"1.0.0","id":"7f1c7c3e-2b4a-4f7e-9c1d-1a2b3c4d5e6f","reasoning":"save","action":"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"hi"}}}]}`

	for _, tc := range []struct {
		name   string
		runner tasks.Runner
		first  string // the message creating the task, its Take succeeding
		next   string // "": the message creating the task is the one that fails
		store  bool   // the store's later writes fail
		apply  bool   // the store's Apply fails
		state  tasks.State
	}{
		{name: "Take of a continued task", next: `{"messageId":"m2","role":"user","parts":[{"text":"more"}]}`, first: free, state: tasks.StateSubmitted},
		{name: "Take of a new task, its failure not recorded", first: free, store: true, state: tasks.StateSubmitted},
		{name: "move to working before a run", runner: failingRunner{}, first: proposal, store: true, state: tasks.StateSubmitted},
		{name: "the run's outcome", runner: failingRunner{}, first: proposal, apply: true, state: tasks.StateWorking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := &failingAgent{}
			store := &updateFailing{Store: tasks.NewMemoryStore(tasks.MemoryStoreOptions{})}
			svc := tasks.NewService(store, tasks.ServiceOptions{Now: r.now, Agent: ag, Runner: tc.runner})
			router := snap.NewRouter()
			svc.Register(router, nil)
			server := r.server(router, snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10))
			request := func(payload string) []byte { return r.request(t, payload) }
			answer := func(raw []byte) (task map[string]any, p map[string]any) {
				t.Helper()
				resp := server.Respond(ctx, snap.Inbound{Raw: raw})
				if resp == nil {
					t.Fatal("no answer")
				}
				if err := json.Unmarshal(resp.Payload, &p); err != nil {
					t.Fatal(err)
				}
				task, _ = p["task"].(map[string]any)
				return task, p
			}

			var failing []byte
			taskID := ""
			if tc.next != "" {
				task, p := answer(request(`{"message":` + tc.first + `}`))
				if task == nil {
					t.Fatalf("the task's creation: %v", p)
				}
				taskID = task["id"].(string)
				failing = request(`{"taskId":"` + taskID + `","message":` + tc.next + `}`)
			} else {
				failing = request(`{"message":` + tc.first + `}`)
			}
			ag.fail.Store(true)
			store.fail.Store(tc.store)
			store.failApply.Store(tc.apply)
			task, p := answer(failing)
			if task == nil {
				t.Fatalf("answer after the commit, its next step failing: %v; want the task", p)
			}
			id, _ := task["id"].(string)
			status, _ := task["status"].(map[string]any)
			if id == "" || (taskID != "" && id != taskID) || status["state"] != string(tc.state) {
				t.Fatalf("answered task %v; want task %q %s", task, taskID, tc.state)
			}
			stored, err := svc.Task(ctx, id)
			if err != nil || stored.Status.State != tc.state {
				t.Fatalf("stored task: %v %v", stored, err)
			}
			// The retry of the same message learns of the task as well.
			retry, p := answer(failing)
			if retry == nil || retry["id"] != id || p["deduplicated"] != true {
				t.Fatalf("the retry: %v; want task %s, deduplicated", p, id)
			}
			// What failed is taken up again by the node's reconcile pass,
			// as after a stop (a free-text task with no job goes to the
			// agent again; a continued one's job is the agent's own).
			ag.fail.Store(false)
			store.fail.Store(false)
			store.failApply.Store(false)
			before := ag.taken.Load()
			got, err := svc.Resume(ctx, id)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if tc.first == free && tc.next == "" && ag.taken.Load() != before+1 {
				t.Fatal("the resumed task was not handed to the agent")
			}
			if tc.runner != nil && got.Status.State != tasks.StateFailed {
				t.Fatalf("the resumed run left the task %s; want failed, the runner's failure", got.Status.State)
			}
		})
	}
}

// eventsFailing fails the reads of a task's events.
type eventsFailing struct{ tasks.Store }

func (eventsFailing) EventsPage(context.Context, string, int64, int, int) ([]tasks.Event, error) {
	return nil, errors.New("store: database is locked")
}

// A message/stream whose message is stored but whose events cannot be
// read answers with the task as it stands, with no events, rather than
// 5001 for a request whose id is spent.
func TestStreamAnsweredWithTheTaskAfterItsCommit(t *testing.T) {
	ctx := context.Background()
	svc := tasks.NewService(eventsFailing{tasks.NewMemoryStore(tasks.MemoryStoreOptions{})}, tasks.ServiceOptions{})
	p, err := snap.ParseSendParams([]byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hello"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	got, err := svc.StreamMessage(ctx, "alice", p, func(any) error { events++; return nil })
	if err != nil || got == nil || got.Status.State != tasks.StateSubmitted {
		t.Fatalf("stream: %v, %v; want the submitted task", got, err)
	}
	if stored, err := svc.Task(ctx, got.ID); err != nil || stored.ID != got.ID {
		t.Fatalf("stored task: %v %v", stored, err)
	}
	if events != 0 {
		t.Fatalf("%d events emitted; want none", events)
	}
}

// outcomeRunner ends every run with its outcome.
type outcomeRunner struct{ out tasks.Outcome }

func (r outcomeRunner) Run(context.Context, tasks.Job) (tasks.Outcome, error) { return r.out, nil }

// getFailing fails the store's reads of a task (Get) while fail is set:
// the final read of a stream's task.
type getFailing struct {
	tasks.Store
	fail atomic.Bool
}

func (s *getFailing) Get(ctx context.Context, id string) (*tasks.Task, error) {
	if s.fail.Load() {
		return nil, errors.New("store: database is locked")
	}
	return s.Store.Get(ctx, id)
}

// A message/stream or tasks/resubscribe whose events were sent, and
// whose final read of its task fails, is answered with the task as last
// known, its events applied (state, artifacts), not 5001: its replay
// record is written (with its task, or before its first event), so a
// retry, as 5001 asks, would be refused as a duplicate (2006) and the
// requester told to retry what cannot be retried.
func TestStreamFinalReadFailing(t *testing.T) {
	ctx := context.Background()
	r := newClaimRig(t)
	const proposal = `{"message":{"messageId":"m1","role":"user","parts":[{"data":{"schema_version":"1.0.0","id":"7f1c7c3e-2b4a-4f7e-9c1d-1a2b3c4d5e6f","reasoning":"save","action":"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"hi"}}}]}}`
	result := tasks.Artifact{ArtifactID: "result", Parts: []tasks.Part{tasks.TextPart("ok")}}

	for _, tc := range []struct {
		name string
		held bool // the run holds the task input_required; the test completes it live
		call func(taskID string) (method, payload string)
	}{
		{name: "message/stream", call: func(string) (string, string) { return "message/stream", proposal }},
		{name: "tasks/resubscribe", call: func(id string) (string, string) { return "tasks/resubscribe", `{"taskId":"` + id + `"}` }},
		{name: "tasks/resubscribe, the end live", held: true, call: func(id string) (string, string) {
			return "tasks/resubscribe", `{"taskId":"` + id + `"}`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tasks.Outcome{State: tasks.StateCompleted, Artifacts: []tasks.Artifact{result}}
			if tc.held {
				out = tasks.Outcome{State: tasks.StateInputRequired, Note: "held"}
			}
			store := &getFailing{Store: tasks.NewMemoryStore(tasks.MemoryStoreOptions{})}
			svc := tasks.NewService(store, tasks.ServiceOptions{Now: r.now, Runner: outcomeRunner{out}})
			router := snap.NewRouter()
			svc.Register(router, nil)
			server := r.serverClaiming(router, snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10),
				"message/send", "message/stream", "tasks/resubscribe")
			taskID := ""
			if tc.name != "message/stream" {
				resp := server.Respond(ctx, snap.Inbound{Raw: r.request(t, proposal)})
				var p tasks.TaskResponse
				if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Task == nil || p.Task.Status.State != out.State {
					t.Fatalf("the task: %s (%v)", resp.Payload, err)
				}
				taskID = p.Task.ID
			}
			method, payload := tc.call(taskID)
			raw := r.call(t, method, payload)

			// Each event the stream sends; the last one's (the task ended)
			// leaves the store failing its reads.
			events := make(chan tasks.State, 16)
			serve := func() *snap.Message {
				return server.Serve(ctx, snap.Inbound{Raw: raw}, func(m *snap.Message) error {
					var e struct {
						State     tasks.State `json:"state"`
						Heartbeat bool        `json:"heartbeat"`
					}
					if err := json.Unmarshal(m.Payload, &e); err == nil && !e.Heartbeat {
						if e.State == tasks.StateCompleted {
							store.fail.Store(true)
						}
						events <- e.State
					}
					return nil
				})
			}
			answered := make(chan *snap.Message, 1)
			go func() { answered <- serve() }()
			if tc.held {
				// Once the stream has said the task waits, it ends live.
				if st := <-events; st != tasks.StateInputRequired {
					t.Fatalf("first event %s; want input_required", st)
				}
				if _, err := svc.Resolve(ctx, taskID, tasks.Outcome{State: tasks.StateCompleted, Artifacts: []tasks.Artifact{result}}); err != nil {
					t.Fatal(err)
				}
			}
			final := <-answered
			store.fail.Store(false)
			var p struct {
				Task  *tasks.Task `json:"task"`
				Error *snap.Error `json:"error"`
			}
			if err := json.Unmarshal(final.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Task == nil || p.Task.Status.State != tasks.StateCompleted || len(p.Task.Artifacts) != 1 || p.Task.Artifacts[0].ArtifactID != "result" {
				t.Fatalf("final answer after the events, its read failing: %s; want the completed task with its artifact", final.Payload)
			}
			// Its id is spent: a copy is the duplicate.
			again := server.Serve(ctx, snap.Inbound{Raw: raw}, func(*snap.Message) error { return nil })
			if !strings.Contains(string(again.Payload), `"code":2006`) {
				t.Fatalf("a copy: %s; want 2006", again.Payload)
			}
		})
	}
}
