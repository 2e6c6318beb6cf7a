package sqlstore

import (
	"context"

	"github.com/snapnode/snapnode/tasks"
)

var _ tasks.Watcher = (*Store)(nil)

// eventsChannel is the PostgreSQL channel on which the trigger of
// migration 0007 announces each task event written, by its task's id.
const eventsChannel = "snapnode_task_events"

// Watch implements tasks.Watcher on PostgreSQL: every process sharing the
// database announces the events it writes (a trigger, at each commit),
// and Watch hears them on a connection of its own. changed("") comes
// first, once the watch is in place. On SQLite, whose file only this
// process writes, it returns sqldb.ErrNotPostgres at once.
func (s *Store) Watch(ctx context.Context, changed func(taskID string)) error {
	if err := s.start(ctx, "watch"); err != nil {
		return err
	}
	return s.db.Listen(ctx, eventsChannel, func() { changed("") }, changed)
}
