package snapnostr

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// entries counts the entries of m.
func entries(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// noMarks fails the test when the inbox still marks a request fed, late
// or unchecked.
func noMarks(t *testing.T, in *Inbox) {
	t.Helper()
	for name, m := range map[string]*sync.Map{"fed": &in.fed, "late": &in.late, "unchecked": &in.unchecked} {
		if n := entries(m); n != 0 {
			t.Errorf("%d requests left marked %s", n, name)
		}
	}
}

// hangingSeen is a Checkpoint whose Seen and SeenMany wait for their
// context to end.
type hangingSeen struct{ *MemoryCheckpoint }

func (c hangingSeen) Seen(ctx context.Context, _ string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func (c hangingSeen) SeenMany(ctx context.Context, ids []string) (map[string]bool, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// denyAll refuses every key.
type denyAll struct{}

func (denyAll) Allow(string) (bool, time.Duration) { return false, time.Second }

// The paths of the backlog's requests the other tests leave out: a
// stored request the backlog has no room for (asked about and queued
// there and then), one it pushes out as the inbox stops (left counted,
// unrefused), one over its key's rate as it leaves the backlog (held
// there, and left counted, unrefused, at the stop), and
// a checkpoint that does not answer the feeder (queued after
// seenTimeout, then at once during seenPause). Each request is finished
// once, or left counted at the stop, and none stays marked fed, late or
// unchecked.
func TestBacklogPathsFinishEachRequestOnce(t *testing.T) {
	t.Run("no room", func(t *testing.T) {
		cp := NewMemoryCheckpoint()
		r := newBacklogRig(t, InboxConfig{Checkpoint: cp}, 4, 1, 1<<20)
		first := r.storedBefore(r.peer, time.Minute, "first")
		r.in.admitTo(r.ctx, first, r.jobs, r.wait, true, r.refusals, true)
		processed := r.storedBefore(r.peer, time.Minute, "processed")
		if err := cp.Done(r.ctx, processed.ID, processed.CreatedAt); err != nil {
			t.Fatal(err)
		}
		r.in.admitTo(r.ctx, processed, r.jobs, r.wait, true, r.refusals, true)
		fresh := r.storedBefore(r.peer, time.Minute, "fresh")
		r.in.admitTo(r.ctx, fresh, r.jobs, r.wait, true, r.refusals, true)
		if n := r.jobs.Len(); n != 1 {
			t.Errorf("%d queued, want the fresh one", n)
		}
		if n := inFlight(t, r.in); n != 2 {
			t.Errorf("%d in flight, want 2", n)
		}
		if _, ok := r.in.late.Load(fresh); !ok {
			t.Error("the fresh late one queued is not marked late")
		}
		if _, ok := r.in.unchecked.Load(first); !ok {
			t.Error("the one in the backlog is not marked unchecked")
		}
		if _, ok := r.in.unchecked.Load(fresh); ok {
			t.Error("the one queued is still marked unchecked")
		}
	})
	t.Run("pushed out at the stop", func(t *testing.T) {
		cp := ctxCheckpoint{NewMemoryCheckpoint()}
		r := newBacklogRig(t, InboxConfig{Checkpoint: cp}, 4, 2, 1<<20)
		for _, c := range []string{"one", "two"} {
			r.in.admitTo(r.ctx, r.storedBefore(r.peer, time.Minute, c), r.jobs, r.wait, true, r.refusals, false)
		}
		ctx, cancel := context.WithCancel(r.ctx)
		cancel()
		r.in.admitTo(ctx, r.storedBefore(r.other, time.Minute, "other"), r.jobs, r.wait, true, r.refusals, false)
		r.stopRefusals()
		if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
			t.Errorf("%d refusals sent, want none", n)
		}
		if n := inFlight(t, r.in); n != 3 {
			t.Errorf("%d in flight, want 3 (one dropped and left counted)", n)
		}
		if n := entries(&r.in.unchecked); n != 2 {
			t.Errorf("%d marked unchecked, want the 2 in the backlog", n)
		}
		r.drain()
	})
	t.Run("limiter as it leaves", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cp := NewMemoryCheckpoint()
			r := newBacklogRig(t, InboxConfig{Checkpoint: cp, KeyLimiter: denyAll{}}, 4, 8, 1<<20)
			r.in.admitTo(r.ctx, r.storedBefore(r.peer, time.Minute, "refused"), r.jobs, r.wait, true, r.refusals, false)
			r.in.admitTo(r.ctx, r.storedBefore(r.other, time.Minute, "late"), r.jobs, r.wait, true, r.refusals, true)
			ctx, cancel := context.WithCancel(r.ctx)
			var wg sync.WaitGroup
			wg.Go(func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals) })
			synctest.Wait()
			cancel()
			r.wait.q.Close()
			wg.Wait()
			r.stopRefusals()
			if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
				t.Errorf("%d refusals sent, want none: both waited for their rate", n)
			}
			if n := inFlight(t, r.in); n != 2 {
				t.Errorf("%d in flight, want 2: dropped at the stop, left counted", n)
			}
			noMarks(t, r.in)
		})
	})
	t.Run("checkpoint hangs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newBacklogRig(t, InboxConfig{Checkpoint: hangingSeen{NewMemoryCheckpoint()}}, 16, 8, 1<<20)
			var evs []*nostr.Event
			for _, c := range []string{"a", "b", "c"} {
				ev := r.storedBefore(r.peer, time.Minute, c)
				evs = append(evs, ev)
				r.in.admitTo(r.ctx, ev, r.jobs, r.wait, true, r.refusals, false)
			}
			ctx, cancel := context.WithCancel(r.ctx)
			var wg sync.WaitGroup
			wg.Go(func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals) })
			synctest.Wait()
			if n := r.jobs.Len(); n != 0 {
				t.Fatalf("%d queued before the checkpoint timed out", n)
			}
			time.Sleep(seenTimeout)
			synctest.Wait()
			if n := r.jobs.Len(); n != 3 {
				t.Fatalf("%d queued once the checkpoint timed out, want 3", n)
			}
			// Paused: the next is queued at once.
			ev := r.storedBefore(r.other, time.Minute, "d")
			r.in.admitTo(r.ctx, ev, r.jobs, r.wait, true, r.refusals, false)
			synctest.Wait()
			if n := r.jobs.Len(); n != 4 {
				t.Errorf("%d queued during the pause, want 4", n)
			}
			for r.jobs.Len() > 0 {
				ev, _ := r.jobs.Pop()
				r.in.serve(&running{stop: r.ctx, work: r.ctx}, ev)
			}
			cancel()
			r.wait.q.Close()
			wg.Wait()
			if n := inFlight(t, r.in); n != 0 {
				t.Errorf("%d in flight", n)
			}
			noMarks(t, r.in)
		})
	})
}
