package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// accepted keeps a task that a message/send request is about to create
// (it is stored next) as the request's result in results
// (tasks.ServiceOptions.Accepted), until the answer replaces it: a retry
// of a request whose answer a crash lost gets its task (see liveResults)
// rather than 2006.
func accepted(results snap.ResultStore, retention time.Duration, now func() time.Time, logger *slog.Logger) func(ctx context.Context, from, id string, t *tasks.Task) {
	return func(ctx context.Context, from, id string, t *tasks.Task) {
		b, err := json.Marshal(tasks.NewTaskResponse(t))
		if err == nil {
			err = results.SaveResult(ctx, from, id, b, now().Add(retention))
		}
		if err != nil {
			logger.Warn("task not kept as its request's result", "task", t.ID, "from", from, "id", id, "err", err)
		}
	}
}

// liveResults is the ResultStore of the node's server: a result kept
// while its task was submitted or working (by accepted, or the answer
// of a task left for the agent) is answered with the task as it is now,
// so that a retry after a restart sees how the task ended; one whose
// task was never stored is no result.
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
	if se := (*snap.Error)(nil); errors.As(err, &se) && se.Code == snap.CodeTaskNotFound {
		// Kept just before the task was to be stored, which a stop
		// prevented: the request was never taken in, and its retry is a
		// duplicate with no result (2006).
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
