package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

func artifact(id, content string) tasks.Artifact {
	return tasks.Artifact{ArtifactID: id, Parts: []tasks.Part{text(content)}}
}

// Apply records the outcome's state, artifacts and their events in one
// write: a waiting task passes through working, an artifact the task
// already has is left out, the versions follow one another and the events
// returned are those stored.
func testApply(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	mustCreate(t, s, sample("ap1", "owner-a"))
	at := base().Add(time.Minute)

	held, evs, err := s.Apply(ctx, "ap1", tasks.Outcome{State: tasks.StateInputRequired, Note: "needs an operator",
		Artifacts: []tasks.Artifact{artifact("diff", "--- a")}, At: at})
	if err != nil {
		t.Fatal(err)
	}
	want := "v2:status:working v3:artifact:diff v4:status:input_required(needs an operator)"
	if got := eventSummary(evs); got != want {
		t.Fatalf("events of Apply = %s\nwant             %s", got, want)
	}
	if held.Version != 4 || held.Status.State != tasks.StateInputRequired || !held.Status.Timestamp.Equal(at) ||
		len(held.Artifacts) != 1 || held.History[0].MessageID != "m-ap1" || held.Owner != "owner-a" {
		t.Fatalf("task after Apply: v%d %+v, %d artifacts", held.Version, held.Status, len(held.Artifacts))
	}
	equal(t, "stored task", mustGet(t, s, "ap1"), held)

	// The approved action: the artifact recorded with the hold is not
	// added again; a new one and a duplicate within the outcome once.
	done, evs, err := s.Apply(ctx, "ap1", tasks.Outcome{State: tasks.StateCompleted, Note: "done",
		Artifacts: []tasks.Artifact{artifact("diff", "--- a"), artifact("result", "ok"), artifact("result", "again")}, At: at.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	want = "v5:status:working v6:artifact:result v7:status:completed(done)"
	if got := eventSummary(evs); got != want {
		t.Fatalf("events of the second Apply = %s\nwant                        %s", got, want)
	}
	if done.Version != 7 || len(done.Artifacts) != 2 || *done.Artifacts[1].Parts[0].Text != "ok" {
		t.Fatalf("task after the second Apply: v%d, artifacts %+v", done.Version, done.Artifacts)
	}
	stored, err := s.Events(ctx, "ap1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventSummary(stored), "v2:status:working v3:artifact:diff v4:status:input_required(needs an operator) "+want; got != want {
		t.Fatalf("stored events = %s\nwant            %s", got, want)
	}
	equal(t, "stored task", mustGet(t, s, "ap1"), done)

	// From working, no extra status.
	cur := mustCreate(t, s, sample("ap2", "owner-a"))
	working := cur.Clone()
	working.Status = tasks.Status{State: tasks.StateWorking, Timestamp: at}
	if _, err := s.Update(ctx, working, cur.Version); err != nil {
		t.Fatal(err)
	}
	// A progress note: the task stays working, one event.
	step, evs, err := s.Apply(ctx, "ap2", tasks.Outcome{State: tasks.StateWorking, Note: "step 1: WRITE_FILE", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventSummary(evs); got != "v3:status:working(step 1: WRITE_FILE)" || step.Version != 3 || step.Status.Message != "step 1: WRITE_FILE" {
		t.Fatalf("progress from working: events %s, v%d %+v", got, step.Version, step.Status)
	}
	failed, evs, err := s.Apply(ctx, "ap2", tasks.Outcome{State: tasks.StateFailed, Note: "refused", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventSummary(evs); got != "v4:status:failed(refused)" || failed.Version != 4 {
		t.Fatalf("Apply from working: events %s, v%d", got, failed.Version)
	}
	// A progress note on a task that waits for input makes it work again,
	// one event.
	mustCreate(t, s, sample("ap3", "owner-a"))
	if _, _, err := s.Apply(ctx, "ap3", tasks.Outcome{State: tasks.StateInputRequired, Note: "waits", At: at}); err != nil {
		t.Fatal(err)
	}
	resumed, evs, err := s.Apply(ctx, "ap3", tasks.Outcome{State: tasks.StateWorking, Note: "resumed", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventSummary(evs); got != "v4:status:working(resumed)" || resumed.Version != 4 {
		t.Fatalf("progress from input_required: events %s, v%d", got, resumed.Version)
	}
	n, err := s.Prune(ctx, at.Add(2*time.Second), 10)
	if err != nil || n != 2 {
		t.Fatalf("Prune of the tasks Apply ended: %d, %v", n, err)
	}
}

// A refused Apply changes nothing: no state, no artifact, no event.
func testApplyAtomic(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("aa", "owner-a"))
	v := cur.Version
	for i := range tasks.MaxArtifacts - 1 {
		got, err := s.AppendArtifact(ctx, "aa", v, artifact(fmt.Sprintf("a%d", i), "x"))
		if err != nil {
			t.Fatal(err)
		}
		v = got.Version
	}
	before := mustGet(t, s, "aa")
	beforeEvents, err := s.Events(ctx, "aa", 0)
	if err != nil {
		t.Fatal(err)
	}
	at := base().Add(time.Hour)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	long := make([]rune, tasks.MaxStatusMessage+1)
	for i := range long {
		long[i] = 'é'
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		id   string
		out  tasks.Outcome
		want error
	}{
		// The 100th artifact fits, the 101st does not: the first is not
		// kept either.
		{"artifact limit", ctx, "aa", tasks.Outcome{State: tasks.StateCompleted, At: at,
			Artifacts: []tasks.Artifact{artifact("last", "x"), artifact("over", "x")}}, tasks.ErrLimit},
		{"outcome state", ctx, "aa", tasks.Outcome{State: tasks.StateSubmitted, At: at}, tasks.ErrIllegalTransition},
		{"unknown state", ctx, "aa", tasks.Outcome{State: "done", At: at}, tasks.ErrIllegalTransition},
		{"canceled", ctx, "aa", tasks.Outcome{State: tasks.StateCanceled, At: at}, tasks.ErrIllegalTransition},
		{"no time", ctx, "aa", tasks.Outcome{State: tasks.StateCompleted}, tasks.ErrInvalidTask},
		{"long note", ctx, "aa", tasks.Outcome{State: tasks.StateFailed, Note: string(long), At: at}, tasks.ErrLimit},
		{"missing task", ctx, "nope", tasks.Outcome{State: tasks.StateCompleted, At: at}, tasks.ErrNotFound},
		{"done context", canceled, "aa", tasks.Outcome{State: tasks.StateCompleted, At: at}, context.Canceled},
	} {
		if _, _, err := s.Apply(tc.ctx, tc.id, tc.out); !errors.Is(err, tc.want) {
			t.Errorf("%s: Apply err = %v, want %v", tc.name, err, tc.want)
		}
	}
	equal(t, "task after refused Applies", mustGet(t, s, "aa"), before)
	after, err := s.Events(ctx, "aa", 0)
	if err != nil {
		t.Fatal(err)
	}
	if eventSummary(after) != eventSummary(beforeEvents) {
		t.Fatalf("refused Applies recorded events: %s", eventSummary(after[len(beforeEvents):]))
	}

	// A terminal task takes no outcome.
	if _, _, err := s.Apply(ctx, "aa", tasks.Outcome{State: tasks.StateFailed, At: at}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, "aa", tasks.Outcome{State: tasks.StateCompleted, At: at}); !errors.Is(err, tasks.ErrTerminal) {
		t.Fatalf("Apply to a failed task: %v, want ErrTerminal", err)
	}
	if got := mustGet(t, s, "aa"); got.Status.State != tasks.StateFailed || got.Version != before.Version+2 {
		t.Fatalf("failed task changed: %s v%d", got.Status.State, got.Version)
	}
}

// An outcome's Replace puts an artifact in the place of the task's
// artifact of the same id, with an artifact event, and adds one the task
// has not; one equal to the task's changes nothing. An outcome in
// StateKept changes artifacts only: no status event, the status kept.
func testApplyReplace(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	mustCreate(t, s, sample("ar1", "owner-a"))
	at := base().Add(time.Minute)
	held, _, err := s.Apply(ctx, "ar1", tasks.Outcome{State: tasks.StateInputRequired, Note: "needs an operator",
		Artifacts: []tasks.Artifact{artifact("pending", "--- a"), artifact("other", "x")}, At: at})
	if err != nil {
		t.Fatal(err)
	}

	// Artifacts only: the task keeps its status.
	same, evs, err := s.Apply(ctx, "ar1", tasks.Outcome{Replace: []tasks.Artifact{artifact("pending", "--- a")}, At: at.Add(time.Second)})
	if err != nil || len(evs) != 0 || same.Version != held.Version {
		t.Fatalf("replacing an artifact by its equal: %v, events %s, v%d; want none, v%d", err, eventSummary(evs), same.Version, held.Version)
	}
	kept, evs, err := s.Apply(ctx, "ar1", tasks.Outcome{Replace: []tasks.Artifact{artifact("other", "y")}, At: at.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventSummary(evs), "v6:artifact:other"; got != want {
		t.Fatalf("events of an artifact replaced = %s\nwant                          %s", got, want)
	}
	if kept.Version != 6 || kept.Status != held.Status || len(kept.Artifacts) != 2 || *kept.Artifacts[1].Parts[0].Text != "y" {
		t.Fatalf("task after an artifact replaced: v%d %+v %+v", kept.Version, kept.Status, kept.Artifacts)
	}
	equal(t, "stored task", mustGet(t, s, "ar1"), kept)

	// The decision: the pending artifact says what became of it, in its
	// place; a new one comes after.
	decided := tasks.Artifact{ArtifactID: "pending", Name: "applied", Parts: []tasks.Part{text("applied"), text("--- a")}}
	done, evs, err := s.Apply(ctx, "ar1", tasks.Outcome{State: tasks.StateCompleted, Note: "done",
		Artifacts: []tasks.Artifact{artifact("result", "ok")}, Replace: []tasks.Artifact{decided, artifact("fresh", "f")}, At: at.Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventSummary(evs), "v7:status:working v8:artifact:pending v9:artifact:fresh v10:artifact:result v11:status:completed(done)"; got != want {
		t.Fatalf("events of the decision = %s\nwant                   %s", got, want)
	}
	if evs[1].Artifact.Name != "applied" {
		t.Fatalf("the replacing event carries %+v", evs[1].Artifact)
	}
	var ids []string
	for _, a := range done.Artifacts {
		ids = append(ids, a.ArtifactID)
	}
	if got := fmt.Sprint(ids); got != "[pending other fresh result]" || done.Artifacts[0].Name != "applied" || len(done.Artifacts[0].Parts) != 2 {
		t.Fatalf("artifacts after the decision: %s %+v", got, done.Artifacts[0])
	}
	equal(t, "stored task", mustGet(t, s, "ar1"), done)
	stored, err := s.Events(ctx, "ar1", 6)
	if err != nil {
		t.Fatal(err)
	}
	if eventSummary(stored) != eventSummary(evs) {
		t.Fatalf("stored events = %s\nwant            %s", eventSummary(stored), eventSummary(evs))
	}

	// An ended task takes no replacement.
	if _, _, err := s.Apply(ctx, "ar1", tasks.Outcome{Replace: []tasks.Artifact{artifact("other", "z")}, At: at}); !errors.Is(err, tasks.ErrTerminal) {
		t.Fatalf("replacing an artifact of a completed task: %v, want ErrTerminal", err)
	}
}
