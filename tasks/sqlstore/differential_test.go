package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// Random sequences of calls, some stale, some illegal, go to a MemoryStore
// and to the SQL store: both must agree on every outcome, the error kind
// and the task returned. The state machine, versions and limits are
// MemoryStore's; this checks the SQL store keeps them whatever the order.
func TestDifferential(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		sqlStore := open(t, dsn, Options{})
		mem := tasks.NewMemoryStore(tasks.MemoryStoreOptions{})
		rng := rand.New(rand.NewPCG(4, 2026))
		ids := []string{"d0"}
		states := tasks.States()
		// Update targets lean to the live states, so that tasks live long
		// enough for their histories and artifacts to grow.
		targets := []tasks.State{tasks.StateWorking, tasks.StateWorking, tasks.StateWorking, tasks.StateInputRequired,
			tasks.StateInputRequired, tasks.StateSubmitted, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled}
		version := map[string]int64{} // the version the caller believes in
		at := time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)
		outcomes := map[string]int{}

		for step := range 1500 {
			// Mostly one of the newest tasks.
			id := ids[max(0, len(ids)-1-rng.IntN(3))]
			expected := version[id]
			if rng.IntN(5) == 0 {
				expected += int64(rng.IntN(3)) - 1 // stale or future
			}
			at = at.Add(time.Duration(rng.IntN(5000)) * time.Microsecond)
			var call func(tasks.Store) (*tasks.Task, error)
			var what string
			switch op := rng.IntN(12); {
			case op <= 1:
				if rng.IntN(4) > 0 {
					id = fmt.Sprintf("d%d", len(ids))
					ids = append(ids, id)
				}
				tk := task(id, "alice")
				tk.Status.State = states[rng.IntN(len(states))]
				if rng.IntN(3) > 0 {
					tk.Status.State = tasks.StateSubmitted
				}
				tk.CreatedAt = at
				what = "Create " + string(tk.Status.State)
				call = func(s tasks.Store) (*tasks.Task, error) { return s.Create(ctx, tk) }
			case op <= 5:
				st := targets[rng.IntN(len(targets))]
				what = fmt.Sprintf("Update → %s @v%d", st, expected)
				call = func(s tasks.Store) (*tasks.Task, error) {
					cur, err := s.Get(ctx, id)
					if err != nil {
						return nil, err
					}
					next := cur.Clone()
					next.Status = tasks.Status{State: st, Timestamp: at, Message: fmt.Sprintf("step %d", step)}
					next.Metadata = map[string]any{"step": fmt.Sprint(step)}
					return s.Update(ctx, next, expected)
				}
			case op <= 8:
				n := rng.IntN(3)
				what = fmt.Sprintf("AppendHistory %d @v%d", n, expected)
				msgs := make([]tasks.Message, n)
				for i := range msgs {
					msgs[i] = tasks.Message{MessageID: fmt.Sprintf("s%d-%d", step, i), Role: tasks.RoleAgent, Parts: []tasks.Part{tasks.TextPart("x")}}
				}
				call = func(s tasks.Store) (*tasks.Task, error) { return s.AppendHistory(ctx, id, expected, msgs...) }
			default:
				a := tasks.Artifact{ArtifactID: fmt.Sprintf("a%d", rng.IntN(6)), Parts: []tasks.Part{tasks.TextPart("r")}}
				what = fmt.Sprintf("AppendArtifact %s @v%d", a.ArtifactID, expected)
				call = func(s tasks.Store) (*tasks.Task, error) { return s.AppendArtifact(ctx, id, expected, a) }
			}
			wantTask, wantErr := call(mem)
			gotTask, gotErr := call(sqlStore)
			outcomes[errKind(wantErr)]++
			if k1, k2 := errKind(wantErr), errKind(gotErr); k1 != k2 {
				t.Fatalf("step %d %s %s: memory %v (%s), sql %v (%s)", step, what, id, wantErr, k1, gotErr, k2)
			}
			if wantErr == nil {
				if w, g := canonical(wantTask), canonical(gotTask); w != g {
					t.Fatalf("step %d %s %s:\nmemory %s\n   sql %s", step, what, id, w, g)
				}
				version[id] = gotTask.Version
			}
		}
		t.Logf("outcomes: %v", outcomes)
		for _, id := range ids {
			w, werr := mem.Get(ctx, id)
			g, gerr := sqlStore.Get(ctx, id)
			if errKind(werr) != errKind(gerr) || (werr == nil && canonical(w) != canonical(g)) {
				t.Fatalf("final %s differs: %v %v", id, werr, gerr)
			}
		}
	})
}

// errKind names the sentinels err wraps.
func errKind(err error) string {
	if err == nil {
		return "ok"
	}
	kind := ""
	for _, s := range []error{tasks.ErrNotFound, tasks.ErrExists, tasks.ErrVersionConflict, tasks.ErrIllegalTransition,
		tasks.ErrTerminal, tasks.ErrLimit, tasks.ErrInvalidTask} {
		if errors.Is(err, s) {
			kind += "[" + s.Error() + "]"
		}
	}
	if kind == "" {
		return "other: " + err.Error()
	}
	return kind
}

// canonical is a task's JSON with the fields JSON leaves out.
func canonical(t *tasks.Task) string {
	b, _ := json.Marshal(t)
	return fmt.Sprintf("%s owner=%s v%d key=%s created=%s", b, t.Owner, t.Version, t.IdempotencyKey, t.CreatedAt.UTC().Format(time.RFC3339Nano))
}
