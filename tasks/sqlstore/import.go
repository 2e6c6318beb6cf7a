package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

// Import writes ts in one transaction, each task with its creation event,
// the rows Create would write (version 1) but with the task's status time
// as the time of its last change (so that retention judges
// imported tasks by their history, not by the import). It is for bulk
// loads: restoring tasks, or seeding a store for a load test. Each task
// is checked as Create checks it; a task whose id is taken fails the whole
// import with tasks.ErrExists. The live tasks imported are counted
// (NewLimited) but never refused: an import is the operator's.
func (s *Store) Import(ctx context.Context, ts []*tasks.Task) error {
	if err := s.start(ctx, "import"); err != nil {
		return err
	}
	rows := make([]*row, len(ts))
	events := make([]tasks.Event, len(ts))
	for i, t := range ts {
		if err := tasks.CheckCreate(t); err != nil {
			return err
		}
		r, err := encode(t)
		if err != nil {
			return err
		}
		r.version = 1
		created, err := r.task()
		if err != nil {
			return err
		}
		rows[i], events[i] = r, tasks.StatusEvent(created)
	}
	err := s.write(ctx, "import", "", func(ctx context.Context, tx *sql.Tx) error {
		insert := tx.StmtContext(ctx, s.st.insertTask)
		for i, r := range rows {
			if n, err := sqldb.Affected(insert.ExecContext(ctx, r.id, r.owner, r.contextID, r.state, r.statusTS,
				r.statusMessage, r.idemKey, r.createdAt, r.statusTS, string(r.history), string(r.artifacts), string(r.metadata))); err != nil {
				return dbError("import", r.id, err)
			} else if n == 0 {
				return fmt.Errorf("sqlstore: import %s: task %w", r.id, tasks.ErrExists)
			}
			if err := s.recordEvent(ctx, tx, "import", events[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !tasks.State(r.state).Terminal() {
			s.live.Add(r.owner)
		}
	}
	return nil
}
