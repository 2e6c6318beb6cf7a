package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// recordingRunner is a fake Runner (a unit test of the Service's side):
// it records jobs and answers with the outcome its function gives.
type recordingRunner struct {
	jobs []Job
	out  func(Job) (Outcome, error)
}

func (r *recordingRunner) Run(_ context.Context, j Job) (Outcome, error) {
	r.jobs = append(r.jobs, j)
	return r.out(j)
}

// proposalMessage is a message/send payload with the parts given.
func proposalMessage(parts ...string) string { return send(strings.Join(parts, ",")) }

const writeProposal = `{"data":{"schema_version":"1.0.0","id":"7f1c7c3e-2b4a-4f7e-9c1d-1a2b3c4d5e6f","reasoning":"save","action":"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"hi"}}}`

func TestProposals(t *testing.T) {
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"schema_version":"1.0.0"}`, true},
		{`{"a":{"schema_version":"1"},"descriptor_version":"1.0"}`, true},
		{`{"nested":{"schema_version":"1.0.0"}}`, false},
		{`["schema_version"]`, false},
		{`"schema_version"`, false},
		{`{"schema_versions":1}`, false},
		{`{"x":[1,{"y":2}],"schema_version":null}`, true},
		// A proposal's fields without its version: the executor refuses it
		// naming schema_version, rather than the task taking it for data.
		{`{"action":"READ_FILE","args":{"path":"/sandbox/a.txt"}}`, true},
		{`{"args":{},"id":"1","action":"THINK"}`, true},
		{`{"action":"COMPLETED","summary":"done"}`, false},
		{`{"args":{"path":"/sandbox/a.txt"}}`, false},
		{`{"step":{"action":"THINK","args":{}}}`, false},
	} {
		m := Message{Parts: []Part{TextPart("x"), DataPart(json.RawMessage(c.data))}}
		if got := len(Proposals(m)) == 1; got != c.want {
			t.Errorf("Proposals(%s) = %v, want %v", c.data, got, c.want)
		}
	}
}

func TestServiceRunsProposals(t *testing.T) {
	ctx := context.Background()
	r := &recordingRunner{}
	s, _ := newService(t, ServiceOptions{Runner: r})

	// Completed, with artifacts, in one message/send.
	r.out = func(j Job) (Outcome, error) {
		return Outcome{State: StateCompleted, Note: "done", Artifacts: []Artifact{{ArtifactID: "result", Parts: []Part{DataPart(json.RawMessage(`{"status":"success"}`))}}}}, nil
	}
	task := mustSend(t, s, alice, proposalMessage(`{"text":"please"}`, writeProposal))
	if task.Status.State != StateCompleted || task.Status.Message != "done" || len(task.Artifacts) != 1 || len(task.History) != 1 {
		t.Fatalf("task after a completed run: %+v", task)
	}
	if len(r.jobs) != 1 || r.jobs[0].TaskID != task.ID || r.jobs[0].Requester != alice || len(r.jobs[0].Proposals) != 1 {
		t.Fatalf("jobs: %+v", r.jobs)
	}
	evs, _ := s.TaskEvents(ctx, alice, task.ID, 0)
	var kinds []string
	for _, e := range evs {
		k := string(e.Kind)
		if e.Status != nil {
			k += ":" + string(e.Status.State)
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, " "); got != "status:submitted status:working artifact status:completed" {
		t.Fatalf("events: %s", got)
	}

	// Free text never reaches the runner.
	free := mustSend(t, s, alice, send(`{"text":"just text"}`))
	if free.Status.State != StateSubmitted || len(r.jobs) != 1 {
		t.Fatalf("free text: %s, %d jobs", free.Status.State, len(r.jobs))
	}

	// Needs confirmation, then resolved by the operator's approval.
	r.out = func(Job) (Outcome, error) { return Outcome{State: StateInputRequired, Note: "confirm the delete"}, nil }
	held := mustSend(t, s, alice, proposalMessage(writeProposal))
	if held.Status.State != StateInputRequired || held.Status.Message != "confirm the delete" {
		t.Fatalf("held: %+v", held.Status)
	}
	done, err := s.Resolve(ctx, held.ID, Outcome{State: StateCompleted, Artifacts: []Artifact{{ArtifactID: "r", Parts: []Part{TextPart("ok")}}}})
	if err != nil || done.Status.State != StateCompleted || len(done.Artifacts) != 1 {
		t.Fatalf("Resolve: %+v %v", done, err)
	}
	if _, err := s.Resolve(ctx, held.ID, Outcome{State: StateFailed}); !errors.Is(err, ErrTerminal) {
		t.Fatalf("Resolve of a finished task: %v", err)
	}
	if _, err := s.Resolve(ctx, held.ID, Outcome{State: StateWorking}); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("Resolve to working: %v", err)
	}

	// The runner's own failure fails the task without details.
	r.out = func(Job) (Outcome, error) { return Outcome{}, errors.New("disk on fire") }
	failed := mustSend(t, s, alice, proposalMessage(writeProposal))
	if failed.Status.State != StateFailed || strings.Contains(failed.Status.Message, "fire") {
		t.Fatalf("runner error: %+v", failed.Status)
	}

	// Too many proposals in one message: 1004 naming the parts.
	parts := make([]string, MaxProposals+1)
	for i := range parts {
		parts[i] = writeProposal
	}
	_, err = sendJSON(ctx, s, alice, []byte(proposalMessage(parts...)))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.message.parts", "constraint": "maxProposals"})
	if len(r.jobs) != 3 {
		t.Fatalf("%d jobs, want 3", len(r.jobs))
	}
}

// Resume takes up a task a stopped node left working: the proposals of
// its last message go to the Runner as a resumed job, dated from the
// task's status; an artifact the interrupted run already added is not
// added twice; tasks that are not submitted or working are left alone.
func TestResume(t *testing.T) {
	ctx := context.Background()
	r := &recordingRunner{}
	s, _ := newService(t, ServiceOptions{Runner: r})
	result := Artifact{ArtifactID: "result-a1", Parts: []Part{TextPart("ok")}}
	diff := Artifact{ArtifactID: "diff-a1", Parts: []Part{TextPart("+hi")}}

	// A run interrupted after its first artifact: the task is put back
	// to working with the artifact, as a crash mid-Resolve leaves it.
	r.out = func(Job) (Outcome, error) { return Outcome{State: StateInputRequired}, nil }
	task := mustSend(t, s, alice, proposalMessage(writeProposal))
	if _, err := s.Transition(ctx, task.ID, StateWorking, "running 1 proposal"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddArtifact(ctx, task.ID, result); err != nil {
		t.Fatal(err)
	}
	working, _ := s.Task(ctx, task.ID)

	r.jobs = nil
	r.out = func(Job) (Outcome, error) {
		return Outcome{State: StateCompleted, Note: "done", Artifacts: []Artifact{result, diff}}, nil
	}
	got, err := s.Resume(ctx, task.ID)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// Since is when the task began, not its latest status: an action held
	// was recorded before the approval that made the task working again.
	if len(r.jobs) != 1 || !r.jobs[0].Resumed || !r.jobs[0].Since.Equal(working.CreatedAt) ||
		r.jobs[0].Requester != alice || len(r.jobs[0].Proposals) != 1 {
		t.Fatalf("jobs: %+v; want one resumed job of alice since %v", r.jobs, working.CreatedAt)
	}
	if got.Status.State != StateCompleted || len(got.Artifacts) != 2 || got.Artifacts[1].ArtifactID != "diff-a1" {
		t.Fatalf("resumed task: %s, artifacts %+v; want completed with result-a1 and diff-a1 once each", got.Status.State, got.Artifacts)
	}

	// Ended or waiting tasks are not run again.
	for _, id := range []string{task.ID, mustSend(t, s, alice, proposalMessage(writeProposal)).ID} {
		r.jobs = nil
		before, _ := s.Task(ctx, id)
		r.out = func(Job) (Outcome, error) { return Outcome{State: StateFailed}, nil }
		after, err := s.Resume(ctx, id)
		if err != nil || len(r.jobs) != 0 || after.Status.State != before.Status.State {
			t.Fatalf("Resume of a %s task: %s, %d jobs, %v; want it left alone", before.Status.State, after.Status.State, len(r.jobs), err)
		}
	}
	_, err = s.Resume(ctx, "nope")
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": "nope"})
}

// keepingStore is a MemoryStore that records the results CreateKeeping
// is asked to keep (a unit test's fake ResultKeeper).
type keepingStore struct {
	*MemoryStore
	kept []KeptResult
}

func (k *keepingStore) CreateKeeping(ctx context.Context, t *Task, kept KeptResult) (*Task, error) {
	created, err := k.Create(ctx, t)
	if err == nil {
		k.kept = append(k.kept, kept)
	}
	return created, err
}

// A task that message/send creates is stored together with its request's
// result (the task as created, canonical JSON, for KeepResults) before
// the runner starts, so that a retry after a crash gets it; tasks made
// otherwise (SendMessage called directly) keep none.
func TestResultKeptBeforeTheRun(t *testing.T) {
	store := &keepingStore{MemoryStore: NewMemoryStore(MemoryStoreOptions{})}
	r := &recordingRunner{}
	clock := fixedClock()
	s := NewService(store, ServiceOptions{Runner: r, KeepResults: time.Minute, Now: clock})
	r.out = func(Job) (Outcome, error) {
		if len(store.kept) != 1 {
			t.Errorf("the runner started with %d results kept; want 1", len(store.kept))
		}
		return Outcome{State: StateCompleted}, nil
	}
	router := fakeRouter{}
	s.Register(router, nil)
	req := request(alice, "message/send", proposalMessage(writeProposal))
	if _, err := router["message/send"](context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(store.kept) != 1 {
		t.Fatalf("%d results kept; want 1", len(store.kept))
	}
	k := store.kept[0]
	var got struct {
		Task struct {
			ID     string
			Status struct{ State State }
		}
	}
	if err := json.Unmarshal(k.Result, &got); err != nil {
		t.Fatal(err)
	}
	if c, err := snap.Canonicalize(k.Result); err != nil || !bytes.Equal(c, k.Result) {
		t.Errorf("result kept not canonical: %s", k.Result)
	}
	if k.From != alice || k.RequestID != req.ID || got.Task.ID == "" || got.Task.Status.State != StateSubmitted {
		t.Fatalf("kept %+v (%s); want the submitted task for (%s, %s)", k, k.Result, alice, req.ID)
	}
	if d := k.Expires.Sub(clock()); d <= 0 || d > time.Minute {
		t.Errorf("result kept until %v from now; want within a minute", d)
	}
	mustSend(t, s, alice, proposalMessage(writeProposal))
	if len(store.kept) != 1 {
		t.Fatalf("a result kept for a task made without a request: %+v", store.kept)
	}
}
