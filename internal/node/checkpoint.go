package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snapnostr"
)

// checkpoint is the inbox's record of the stored events it processed
// and of where it resumes on each relay.
type checkpoint interface {
	snapnostr.RelayCheckpoint
	Close() error
}

// openCheckpoint returns the inbox checkpoint: in db, beside the tasks,
// or in memory when the node has no database (db nil). On a database, the
// checkpoint an older build kept in its own file (oldFile, the data
// folder's node.db) is carried over on the first start and the file left
// as it is: the node no longer uses it.
func openCheckpoint(ctx context.Context, db *sqldb.DB, oldFile string, logger *slog.Logger) (checkpoint, error) {
	if db == nil {
		return snapnostr.NewMemoryCheckpoint(), nil
	}
	c, err := snapnostr.OpenCheckpoint(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n, err := c.CarryOver(ctx, oldFile)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n > 0 {
		logger.Info("carried the inbox checkpoint over into the database; the older file is no longer used and can be deleted", "file", oldFile, "events", n)
	}
	return c, nil
}
