package tasks

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Watcher is implemented by a Store that other processes write as well
// (sqlstore on PostgreSQL). Watch calls changed with the id of each task
// whose events any process wrote, from the moment it is in place until
// ctx ends or the watch fails, and changed("") when notices may have been
// lost (first, once it is in place: what was written before it started).
// changed must return quickly. Watch returns ctx's error or the failure.
type Watcher interface {
	Watch(ctx context.Context, changed func(taskID string)) error
}

// Bounds of WatchOthers.
const (
	// maxWatchPending bounds the tasks announced and not yet read; past
	// it, every followed task is read again instead.
	maxWatchPending = 4096
	// watchRetry and watchRetryMax space the attempts to watch again
	// after a failure (doubling, reset once a watch is in place).
	watchRetry    = 500 * time.Millisecond
	watchRetryMax = 30 * time.Second
)

// WatchOthers brings to this Service's streams the events that other
// processes sharing its store write (the replicas of a node on one
// PostgreSQL database): for each task w announces that one of this
// Service's streams follows, it reads the stored events after what that
// stream has and publishes them, as a write through this Service would.
// A stream gets each event once, whoever wrote it. It runs until ctx
// ends, watching again after a failure (logged), and returns nil then;
// where w cannot watch (an error wrapping errors.ErrUnsupported) it
// returns that error at once.
func (s *Service) WatchOthers(ctx context.Context, w Watcher) error {
	p := &pending{ids: make(map[string]struct{}), wake: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the Wait: the reader ends with WatchOthers
	wg.Go(func() { s.catchUp(ctx, p) })
	retry := watchRetry
	for {
		in := false
		err := w.Watch(ctx, func(id string) {
			if id == "" && !in {
				in, retry = true, watchRetry
			}
			p.add(id)
		})
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errors.ErrUnsupported) {
			return err // nothing to watch: no other process writes
		}
		s.log.Warn("watching the other processes' task events failed; their events reach this process's streams again once the watch is back", "err", err, "retry_in", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		retry = min(2*retry, watchRetryMax)
	}
}

// catchUp reads and publishes the events of the tasks p names, until ctx
// ends.
func (s *Service) catchUp(ctx context.Context, p *pending) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		ids, all := p.take()
		if all {
			ids = s.events.followed()
		}
		for _, id := range ids {
			after, ok := s.events.lowest(id)
			if !ok {
				continue // no stream of this process follows it
			}
			evs, err := s.store.Events(ctx, id, after)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
					s.log.Warn("reading a task's events another process wrote", "task", id, "err", err)
				}
				continue
			}
			s.publish(id, evs)
		}
	}
}

// pending is the set of tasks announced and not yet read, bounded by
// maxWatchPending; all stands for every task.
type pending struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	all  bool
	wake chan struct{}
}

// add notes the task id ("" for every task) and wakes the reader.
func (p *pending) add(id string) {
	p.mu.Lock()
	switch {
	case p.all:
	case id == "" || len(p.ids) >= maxWatchPending:
		p.all, p.ids = true, make(map[string]struct{})
	default:
		p.ids[id] = struct{}{}
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take empties the set and returns what it held.
func (p *pending) take() ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.ids))
	for id := range p.ids {
		ids = append(ids, id)
	}
	all := p.all
	p.ids, p.all = make(map[string]struct{}), false
	return ids, all
}
