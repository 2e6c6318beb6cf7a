package node

import (
	"context"
	"encoding/json"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// liveResults is the ResultStore of the node's server: a result kept
// while its task was submitted or working (the task as created, kept
// with it by tasks.ServiceOptions.KeepResults, or the answer of a task
// left for the agent) is answered with the task as it is now, so that a
// retry after a restart sees how the task ended; one whose task was
// never stored is no result.
type liveResults struct {
	snap.ResultStore
	tasks *tasks.Service
}

// LoadResult implements snap.ResultStore.
func (r liveResults) LoadResult(ctx context.Context, from, id string, now time.Time) ([]byte, bool, error) {
	p, ok, err := r.ResultStore.LoadResult(ctx, from, id, now)
	if err != nil || !ok {
		return p, ok, err
	}
	var v struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State tasks.State `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if json.Unmarshal(p, &v) != nil || v.Task.ID == "" {
		return p, true, nil
	}
	if st := v.Task.Status.State; st != tasks.StateSubmitted && st != tasks.StateWorking {
		return p, true, nil
	}
	t, err := r.tasks.Task(ctx, v.Task.ID)
	if snap.CodeOf(err) == snap.CodeTaskNotFound {
		// Kept by an older build just before the task was to be
		// stored, which a stop prevented (the task and its result are
		// now written together): the request was never taken in, and
		// its retry is a duplicate with no result (2006).
		return nil, false, nil
	}
	if err != nil || t.Owner != from {
		return p, true, nil // the result kept is the best there is
	}
	b, err := json.Marshal(tasks.NewTaskResponse(t))
	if err != nil {
		return p, true, nil
	}
	return b, true, nil
}
