package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

var (
	_ tasks.TxApplier = (*Store)(nil)
	_ tasks.TxStater  = (*Store)(nil)
)

// StateTx is tasks.TxStater's: the task's state in tx, its row locked
// on PostgreSQL until tx ends.
func (s *Store) StateTx(ctx context.Context, tx *sql.Tx, taskID string) (tasks.State, error) {
	if err := s.start(ctx, "state"); err != nil {
		return "", err
	}
	cur, err := s.forWrite(ctx, tx, "state", taskID)
	if err != nil {
		return "", err
	}
	return tasks.State(cur.state), nil
}

// Apply implements tasks.Store: ApplyTx in a transaction of its own (on
// SQLite in the next group commit).
func (s *Store) Apply(ctx context.Context, taskID string, out tasks.Outcome) (*tasks.Task, []tasks.Event, error) {
	const op = "apply"
	if err := s.start(ctx, op); err != nil {
		return nil, nil, err
	}
	var (
		r     *row
		evs   []tasks.Event
		ended bool
	)
	err := s.write(ctx, op, taskID, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		r, evs, ended, err = s.applyTx(ctx, tx, taskID, out)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return s.applied(r, evs, ended)
}

// ApplyTx implements tasks.TxApplier: Apply inside tx, a transaction of
// the store's database (Store.DB) that the caller commits, such as the
// executor's last commit of an action. Nothing is durable until tx
// commits. The task is read and written with two statements and the
// events inserted with one: the row is locked on PostgreSQL, and on SQLite
// the transaction is the database's only writer. An outcome that ends the
// task gives its owner's place among the live tasks back at once (the
// store does not see tx commit): should tx roll back, the store counts
// one live task too few until the next RecountLive.
func (s *Store) ApplyTx(ctx context.Context, tx *sql.Tx, taskID string, out tasks.Outcome) (*tasks.Task, []tasks.Event, error) {
	if err := s.start(ctx, "apply"); err != nil {
		return nil, nil, err
	}
	r, evs, ended, err := s.applyTx(ctx, tx, taskID, out)
	if err != nil {
		return nil, nil, err
	}
	return s.applied(r, evs, ended)
}

// applied is the end of Apply and ApplyTx once r is written: the owner's
// place among the live tasks given back when the outcome ended the task,
// and the task as written with its events.
func (s *Store) applied(r *row, evs []tasks.Event, ended bool) (*tasks.Task, []tasks.Event, error) {
	if ended {
		s.live.Drop(r.owner)
	}
	t, err := r.task()
	return t, evs, err
}

// applyTx is ApplyTx, returning the row as written and whether the
// outcome ended the task.
func (s *Store) applyTx(ctx context.Context, tx *sql.Tx, taskID string, out tasks.Outcome) (*row, []tasks.Event, bool, error) {
	const op = "apply"
	cur, err := s.forWrite(ctx, tx, op, taskID)
	if err != nil {
		return nil, nil, false, err
	}
	// Only the artifacts' ids are decoded, for PlanApply's checks; all
	// of them when the outcome replaces some, to compare.
	var have []tasks.Artifact
	if len(out.Replace) > 0 {
		err = json.Unmarshal(cur.artifacts, &have)
	} else {
		var ids []struct {
			ArtifactID string `json:"artifactId"`
		}
		err = json.Unmarshal(cur.artifacts, &ids)
		have = make([]tasks.Artifact, len(ids))
		for i, a := range ids {
			have[i].ArtifactID = a.ArtifactID
		}
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("sqlstore: %s %s: stored artifacts: %w", op, taskID, err)
	}
	t := cur.columns()
	t.Artifacts = have
	add, put, evs, err := tasks.PlanApply(t, out)
	if err != nil {
		return nil, nil, false, err
	}
	if len(evs) == 0 {
		return cur, nil, false, nil // tasks.StateKept, nothing to change
	}
	if len(put) > 0 {
		var arr []json.RawMessage
		if err := json.Unmarshal(cur.artifacts, &arr); err != nil {
			return nil, nil, false, fmt.Errorf("sqlstore: %s %s: stored artifacts: %w", op, taskID, err)
		}
		for _, r := range put {
			if arr[r.Index], err = marshal(r.Artifact); err != nil {
				return nil, nil, false, fmt.Errorf("sqlstore: %s %s: %w: %w", op, taskID, tasks.ErrInvalidTask, err)
			}
		}
		if cur.artifacts, err = marshal(arr); err != nil {
			return nil, nil, false, fmt.Errorf("sqlstore: %s %s: artifacts: %w", op, taskID, err)
		}
	}
	if len(add) > 0 {
		more, err := marshal(add)
		if err != nil {
			return nil, nil, false, fmt.Errorf("sqlstore: %s %s: %w: %w", op, taskID, tasks.ErrInvalidTask, err)
		}
		if cur.artifacts, err = appendJSONArray(cur.artifacts, more); err != nil {
			return nil, nil, false, fmt.Errorf("sqlstore: %s %s: stored artifacts: %w", op, taskID, err)
		}
	}
	last := evs[len(evs)-1]
	st := tasks.Status{State: tasks.State(cur.state), Timestamp: fromMicros(cur.statusTS), Message: cur.statusMessage}
	if last.Status != nil {
		st = *last.Status
	}
	res, err := tx.StmtContext(ctx, s.st.applyTask).ExecContext(ctx, string(st.State), micros(st.Timestamp), st.Message,
		string(cur.artifacts), last.Version, micros(time.Now()), taskID, cur.version)
	if err := exactlyOne(op, taskID, res, err); err != nil {
		return nil, nil, false, err
	}
	if err := s.recordEvents(ctx, tx, op, evs); err != nil {
		return nil, nil, false, err
	}
	ended := !tasks.State(cur.state).Terminal() && st.State.Terminal()
	cur.state, cur.statusTS, cur.statusMessage, cur.version = string(st.State), micros(st.Timestamp), st.Message, last.Version
	return cur, evs, ended, nil
}

// recordEvents writes evs in tx with one statement.
func (s *Store) recordEvents(ctx context.Context, tx *sql.Tx, op string, evs []tasks.Event) error {
	if len(evs) == 1 {
		return s.recordEvent(ctx, tx, op, evs[0])
	}
	args := make([]any, 0, 4*len(evs))
	for _, ev := range evs {
		body, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("sqlstore: %s %s: event: %w", op, ev.TaskID, err)
		}
		args = append(args, ev.TaskID, ev.Version, string(ev.Kind), string(body))
	}
	q := "INSERT INTO task_events (task_id, version, kind, body) VALUES (?, ?, ?, ?)" +
		strings.Repeat(", (?, ?, ?, ?)", len(evs)-1)
	_, err := tx.ExecContext(ctx, s.d.Rebind(q), args...)
	return dbError(op+" events", evs[0].TaskID, err)
}
