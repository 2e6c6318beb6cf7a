package snap_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

func TestMemoryReplayStoreRememberOnce(t *testing.T) {
	s := snap.NewMemoryReplayStore(10)
	ctx := context.Background()
	t0 := time.Unix(1_000_000, 0)
	rec := snap.ReplayRecord{FirstSeen: t0, Expires: t0.Add(120 * time.Second)}
	if _, fresh, err := s.Remember(ctx, "a", "1", rec); !fresh || err != nil {
		t.Fatalf("first Remember: fresh=%v err=%v", fresh, err)
	}
	later := rec
	later.FirstSeen = t0.Add(119 * time.Second)
	later.Expires = later.FirstSeen.Add(120 * time.Second)
	prior, fresh, err := s.Remember(ctx, "a", "1", later)
	if fresh || err != nil || !prior.FirstSeen.Equal(t0) {
		t.Fatalf("second Remember within retention: fresh=%v prior=%v err=%v", fresh, prior.FirstSeen, err)
	}
	// The same id from another sender is another pair.
	if _, fresh, _ := s.Remember(ctx, "b", "1", rec); !fresh {
		t.Error("ids are not scoped per sender")
	}
	if _, ok, _ := s.Lookup(ctx, "a", "1", t0.Add(119*time.Second)); !ok {
		t.Error("Lookup lost a live record")
	}
	if _, ok, _ := s.Lookup(ctx, "a", "1", t0.Add(120*time.Second)); ok {
		t.Error("Lookup returned an expired record")
	}
	// After expiry the pair may be recorded again.
	again := snap.ReplayRecord{FirstSeen: t0.Add(121 * time.Second), Expires: t0.Add(241 * time.Second)}
	if _, fresh, _ := s.Remember(ctx, "a", "1", again); !fresh {
		t.Error("expired record still blocks its pair")
	}
}

// A flood fills the store to its bound and no further: the store refuses
// rather than forgets, and recovers as records expire.
func TestMemoryReplayStoreBounded(t *testing.T) {
	const capacity = 1000
	s := snap.NewMemoryReplayStore(capacity)
	ctx := context.Background()
	t0 := time.Unix(1_000_000, 0)
	full := 0
	for i := range 5000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		_, _, err := s.Remember(ctx, "flooder", fmt.Sprint(i), snap.ReplayRecord{FirstSeen: now, Expires: now.Add(120 * time.Second)})
		if errors.Is(err, snap.ErrReplayStoreFull) {
			full++
		} else if err != nil {
			t.Fatal(err)
		}
		if s.Len() > capacity {
			t.Fatalf("store holds %d records, bound is %d", s.Len(), capacity)
		}
	}
	if full != 4000 {
		t.Errorf("%d refusals, want 4000", full)
	}
	exp, ok := s.NextExpiry()
	if !ok || !exp.Equal(t0.Add(120*time.Second)) {
		t.Errorf("NextExpiry = %v %v", exp, ok)
	}
	// Once the oldest records expire, the sweep makes room.
	now := t0.Add(121 * time.Second)
	if _, fresh, err := s.Remember(ctx, "late", "x", snap.ReplayRecord{FirstSeen: now, Expires: now.Add(120 * time.Second)}); !fresh || err != nil {
		t.Fatalf("after expiry: fresh=%v err=%v", fresh, err)
	}
	if s.Len() != 1 {
		t.Errorf("Len after sweep = %d, want 1", s.Len())
	}
}

// Of many concurrent Remembers of one pair, exactly one is fresh.
func TestMemoryReplayStoreAtomic(t *testing.T) {
	s := snap.NewMemoryReplayStore(0)
	ctx := context.Background()
	t0 := time.Unix(1_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for range 64 {
		wg.Go(func() {
			_, f, err := s.Remember(ctx, "a", "same", snap.ReplayRecord{FirstSeen: t0, Expires: t0.Add(time.Minute)})
			if err != nil {
				t.Error(err)
			}
			if f {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if fresh != 1 {
		t.Errorf("%d fresh Remembers, want exactly 1", fresh)
	}
}

// An answer store never refuses: when full it forgets its oldest record,
// and a record it holds is still a replay.
func TestAnswerReplayStoreForgetsOldest(t *testing.T) {
	ctx := context.Background()
	s := snap.NewAnswerReplayStore(2)
	now := time.Unix(1_700_000_000, 0)
	rec := func(i int) snap.ReplayRecord {
		at := now.Add(time.Duration(i) * time.Second)
		return snap.ReplayRecord{FirstSeen: at, Expires: at.Add(snap.MinReplayRetention)}
	}
	for i, id := range []string{"a", "b", "c"} {
		if _, fresh, err := s.Remember(ctx, "from", id, rec(i)); err != nil || !fresh {
			t.Fatalf("%s: fresh=%v err=%v, want fresh", id, fresh, err)
		}
	}
	if _, fresh, err := s.Remember(ctx, "from", "c", rec(3)); err != nil || fresh {
		t.Fatalf("c again: fresh=%v err=%v, want a replay", fresh, err)
	}
	if _, held, _ := s.Lookup(ctx, "from", "a", now.Add(3*time.Second)); held {
		t.Fatal("the oldest record is still held in a full store")
	}
}
