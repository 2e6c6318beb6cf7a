package tasks

import (
	"context"
	"testing"
)

// ServiceOptions.Ended is called once for each write that ends a task
// (a cancel, a worker's move to failed, a runner's outcome), with the
// task as ended, and outside the task's lock: a hook that reads or
// writes the task again (the node's withdrawal reads its held actions)
// does not deadlock. A write that leaves the task live calls it not.
func TestEndedHook(t *testing.T) {
	ctx := context.Background()
	var (
		s     *Service
		ended []State
	)
	s, _ = newService(t, ServiceOptions{Ended: func(ctx context.Context, t *Task) {
		ended = append(ended, t.Status.State)
		// Under the task's lock this would wait for ever.
		if _, err := s.AddArtifact(ctx, t.ID, Artifact{ArtifactID: "late", Parts: []Part{TextPart("x")}}); err == nil {
			panic("an artifact added to an ended task")
		}
	}})
	canceled := mustSend(t, s, alice, send(`{"text":"x"}`))
	if _, err := s.Transition(ctx, canceled.ID, StateWorking, ""); err != nil {
		t.Fatal(err)
	}
	if len(ended) != 0 {
		t.Fatalf("Ended called for a task moved to working: %v", ended)
	}
	if _, err := cancelJSON(ctx, s, alice, []byte(getPayload(canceled.ID))); err != nil {
		t.Fatal(err)
	}
	failed := mustSend(t, s, alice, send(`{"text":"y"}`))
	if _, err := s.Transition(ctx, failed.ID, StateFailed, "no"); err != nil {
		t.Fatal(err)
	}
	completed := mustSend(t, s, alice, send(`{"text":"z"}`))
	if _, err := s.Resolve(ctx, completed.ID, Outcome{State: StateCompleted}); err != nil {
		t.Fatal(err)
	}
	if want := []State{StateCanceled, StateFailed, StateCompleted}; len(ended) != len(want) || ended[0] != want[0] || ended[1] != want[1] || ended[2] != want[2] {
		t.Fatalf("Ended called with %v, want %v", ended, want)
	}
}
