package tasks

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A store that is pruned (Retention) and so never fills keeps its
// eviction queue as short as its terminal tasks: the ids Prune deleted
// do not pile up in it.
func TestMemoryStorePruneBoundsQueue(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(MemoryStoreOptions{MaxTasks: 100})
	at := time.Unix(1770163200, 0).UTC()
	for i := range 5000 {
		task := &Task{ID: fmt.Sprintf("t%d", i), Owner: "o", Status: Status{State: StateCompleted, Timestamp: at}, CreatedAt: at}
		if _, err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if _, err := s.Prune(ctx, at.Add(time.Second), 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n := len(s.terminal) - s.head; n > 2*s.max {
		t.Fatalf("eviction queue holds %d ids for %d tasks (at most %d)", n, len(s.tasks), s.max)
	}
}
