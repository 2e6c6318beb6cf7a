package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
)

// Shared is implemented by a Store that other processes write as well
// (sqlstore on PostgreSQL, where replicas of a node share one database).
// Versions returns the current version of each task of ids that exists
// (at most MaxVersionsBatch ids a call).
type Shared interface {
	Versions(ctx context.Context, ids []string) (map[string]int64, error)
}

// MaxVersionsBatch bounds the ids of one Shared.Versions call.
const MaxVersionsBatch = 500

// DefaultWatchEvery is how often WatchOthers looks, when not told.
const DefaultWatchEvery = 500 * time.Millisecond

// WatchOthers brings to this Service's streams the events that other
// processes sharing its store write: every interval (DefaultWatchEvery
// when ≤ 0), while a stream of this Service follows a task, it reads the
// versions of the tasks followed, one query for up to MaxVersionsBatch
// of them, and for each that moved past what its streams have, reads the
// events after that and publishes them, as a write through this Service
// would. A stream gets each event once, whoever wrote it; one written
// elsewhere arrives within about an interval. A followed task that is no
// longer there (deleted by the retention before a look read its final
// event) ends its streams at that look, with 1001 (task not found) for
// their final response. With no stream, it reads
// nothing. Each look is given up after bound (see periodic.Pass), and
// the next one tries again. It runs until ctx ends, and returns nil then.
func (s *Service) WatchOthers(ctx context.Context, store Shared, every, bound time.Duration) error {
	if every <= 0 {
		every = DefaultWatchEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// seen holds the version of each followed task when its events were
	// last read: a task whose version moved without an event (a message
	// added to its history) is read once, not at every look.
	seen := make(map[string]int64)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		ids := s.events.followed()
		for id := range seen {
			if _, ok := s.events.lowest(id); !ok {
				delete(seen, id) // followed no more: seen stays bounded by the streams
			}
		}
		_, err := periodic.Pass(ctx, "task events watch", bound, func(ctx context.Context) (struct{}, error) {
			for len(ids) > 0 && ctx.Err() == nil {
				n := min(len(ids), MaxVersionsBatch)
				s.catchUp(ctx, store, ids[:n], seen)
				ids = ids[n:]
			}
			return struct{}{}, ctx.Err()
		})
		if errors.Is(err, periodic.ErrAbandoned) {
			s.log.Warn("reading the events other processes wrote; the streams get them at the next try", "err", err)
		}
	}
}

// catchUp publishes the events of the tasks of ids that this Service's
// streams lack.
func (s *Service) catchUp(ctx context.Context, store Shared, ids []string, seen map[string]int64) {
	versions, err := store.Versions(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the versions of followed tasks; the events other processes write reach this one's streams at the next try", "err", err)
		}
		return
	}
	for _, id := range ids {
		if _, ok := versions[id]; !ok {
			// Deleted (the retention, on another process, after its
			// final event and before this look): its streams end,
			// their final response saying the task is not found.
			s.events.gone(id)
		}
	}
	for id, v := range versions {
		after, ok := s.events.lowest(id)
		if !ok || v <= max(after, seen[id]) {
			continue // followed no more, or nothing new
		}
		l := s.lockTask(id)
		read := s.publishStored(ctx, id, after, 0)
		l.Unlock()
		if read {
			seen[id] = v // else read again at the next look
		}
	}
}
