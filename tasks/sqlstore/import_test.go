package sqlstore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// TestImport checks that imported tasks read back as written, each with
// its creation event, that retention judges them by their status time,
// and that a taken id fails the whole import.
func TestImport(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, Options{})
		ctx := context.Background()
		old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		mk := func(id string, state tasks.State) *tasks.Task {
			return &tasks.Task{ID: id, ContextID: "c-" + id, Owner: "bc1p-owner", CreatedAt: old, Version: 1,
				Status:  tasks.Status{State: state, Timestamp: old},
				History: []tasks.Message{{MessageID: "m-" + id, Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("hi")}}},
			}
		}
		in := []*tasks.Task{mk("a", tasks.StateSubmitted), mk("b", tasks.StateCompleted)}
		in[1].Artifacts = []tasks.Artifact{{ArtifactID: "art", Parts: []tasks.Part{tasks.TextPart("result")}}}
		if err := s.Import(ctx, in); err != nil {
			t.Fatal(err)
		}
		for _, want := range in {
			got, err := s.Get(ctx, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Get(%s) = %+v, want %+v", want.ID, got, want)
			}
			evs, err := s.Events(ctx, want.ID, 0)
			if err != nil || len(evs) != 1 || evs[0].Kind != tasks.EventStatus {
				t.Errorf("events of %s: %+v, %v; want its creation event", want.ID, evs, err)
			}
		}
		// Retention prunes the completed task: it ended long ago.
		if n, err := s.Prune(ctx, old.Add(time.Hour), 10); err != nil || n != 1 {
			t.Errorf("Prune = %d, %v; want the one completed task", n, err)
		}
		// A taken id fails the import, and nothing of it is written.
		err := s.Import(ctx, []*tasks.Task{mk("c", tasks.StateSubmitted), mk("a", tasks.StateSubmitted)})
		if !errors.Is(err, tasks.ErrExists) {
			t.Fatalf("import of a taken id: %v, want ErrExists", err)
		}
		if _, err := s.Get(ctx, "c"); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Get(c) after the failed import: %v, want ErrNotFound", err)
		}
		if err := s.Import(ctx, []*tasks.Task{{ID: "d"}}); !errors.Is(err, tasks.ErrInvalidTask) {
			t.Errorf("import of a task without owner: %v, want ErrInvalidTask", err)
		}
	})
}
