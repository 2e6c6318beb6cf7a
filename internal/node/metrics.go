package node

import (
	"context"

	"github.com/snapnode/snapnode/internal/metrics"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// replaySizer is a replay store that can count its records (both of the
// node's can).
type replaySizer interface {
	Len(ctx context.Context) (int64, error)
}

// memoryReplaySize adapts the memory replay store's Len.
type memoryReplaySize struct{ s *snap.MemoryReplayStore }

func (m memoryReplaySize) Len(context.Context) (int64, error) { return int64(m.s.Len()), nil }

// newMetrics makes the node's metrics: the snap server reports each answer
// to it (snap.ServerConfig.Observer); relays' states and counters (the
// pool's, labelled by the configured relay's URL), tasks by state, the
// replay store's size and the database's checkpoints are read at each
// scrape. /metrics on the HTTP transport serves them.
func (n *Node) newMetrics(methods []string, replay snap.ReplayStore, store tasks.Store) *metrics.Metrics {
	m := metrics.New(metrics.Options{Methods: methods})
	m.SetTaskStates(func(ctx context.Context) (map[string]int64, error) {
		counts, err := store.CountByState(ctx)
		out := make(map[string]int64, len(tasks.States()))
		for _, st := range tasks.States() { // every state, 0 included
			out[string(st)] = counts[st]
		}
		return out, err
	})
	m.SetRelays(func() []metrics.Relay {
		var out []metrics.Relay
		for _, h := range n.pool.Health() {
			out = append(out, metrics.Relay{
				URL: h.URL, State: string(h.State),
				EventsReceived: h.EventsReceived, EventsFiltered: h.EventsMismatch,
				EventsInvalid: h.EventsInvalid, EventsDuplicate: h.EventsDuplicate,
				PublishFailed: h.PublishFailed,
				CatchUpPages:  h.CatchUpPages, CatchUpsCut: h.CatchUpsCut,
			})
		}
		return out
	})
	var sizer replaySizer
	switch r := replay.(type) {
	case replaySizer:
		sizer = r
	case *snap.MemoryReplayStore:
		sizer = memoryReplaySize{r}
	}
	if sizer != nil {
		m.SetReplaySize(sizer.Len)
	}
	if n.DB != nil && n.DB.Dialect == sqldb.SQLite {
		m.SetCheckpoints(n.DB.Checkpoints)
	}
	return m
}
