package sqlstore

import (
	"context"
	"strings"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

var _ tasks.Shared = (*Store)(nil)

// Versions implements tasks.Shared: one query by the tasks' primary key.
func (s *Store) Versions(ctx context.Context, ids []string) (map[string]int64, error) {
	if err := s.start(ctx, "versions"); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return map[string]int64{}, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := s.d.Rebind(`SELECT id, version FROM tasks WHERE id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`)
	out, err := sqldb.IntsByKey[string](s.r.QueryContext(ctx, q, args...))
	if err != nil {
		return nil, dbError("versions", "", err)
	}
	return out, nil
}
