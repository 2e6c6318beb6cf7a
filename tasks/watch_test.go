package tasks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// announcer is a Watcher of unit tests: its first watch fails (a server
// not yet up), the later ones are in place at once and announce the ids
// sent on ids.
type announcer struct {
	watches atomic.Int32
	ids     chan string
}

func (a *announcer) Watch(ctx context.Context, changed func(string)) error {
	if a.watches.Add(1) == 1 {
		return errors.New("connection refused")
	}
	changed("")
	for {
		select {
		case id := <-a.ids:
			changed(id)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Events another process wrote to the store (here: the store written
// without the Service) reach a subscriber once the watch announces their
// task, after a first watch that failed; each once, in order, and none
// the subscriber had when it subscribed.
func TestWatchOthersPublishesAnnouncedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, store := newService(t, ServiceOptions{Agent: &stubAgent{}})
		task := mustSend(t, svc, alice, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		// An artifact from before the subscription: the subscriber has it.
		cur, err := store.AppendArtifact(t.Context(), task.ID, task.Version, Artifact{ArtifactID: "before", Parts: []Part{TextPart("x")}})
		if err != nil {
			t.Fatal(err)
		}
		_, live, err := svc.Subscribe(t.Context(), alice, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		a := &announcer{ids: make(chan string)}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.WatchOthers(ctx, a) }()

		synctest.Wait()
		if n := a.watches.Load(); n != 1 {
			t.Fatalf("%d watches before the retry's delay; want 1", n)
		}
		time.Sleep(watchRetry) // bubble time: the retry's delay
		synctest.Wait()
		if n := a.watches.Load(); n != 2 {
			t.Fatalf("%d watches after the retry's delay; want 2", n)
		}
		for _, id := range []string{"a1", "a2"} {
			if cur, err = store.AppendArtifact(t.Context(), task.ID, cur.Version, Artifact{ArtifactID: id, Parts: []Part{TextPart(id)}}); err != nil {
				t.Fatal(err)
			}
		}
		a.ids <- task.ID
		a.ids <- "another-task" // followed by no stream here: nothing read
		synctest.Wait()
		var got []string
		for len(live) > 0 {
			ev := <-live
			got = append(got, ev.Artifact.ArtifactID)
		}
		if len(got) != 2 || got[0] != "a1" || got[1] != "a2" {
			t.Errorf("the subscriber got %v; want [a1 a2]", got)
		}
		// Announced again: nothing new, nothing delivered twice.
		a.ids <- task.ID
		synctest.Wait()
		if len(live) != 0 {
			t.Errorf("%d events delivered again", len(live))
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("WatchOthers: %v", err)
		}
	})
}

// The set of announced tasks is bounded: past maxWatchPending it stands
// for every task instead.
func TestPendingBounded(t *testing.T) {
	p := &pending{ids: make(map[string]struct{}), wake: make(chan struct{}, 1)}
	for i := range maxWatchPending {
		p.add(string(rune('a'+i%26)) + string(rune(i)))
	}
	if ids, all := p.take(); all || len(ids) != maxWatchPending {
		t.Fatalf("take: %d ids, all %v; want %d and false", len(ids), all, maxWatchPending)
	}
	for i := range maxWatchPending + 1 {
		p.add(string(rune(i + 1)))
	}
	if ids, all := p.take(); !all || len(ids) != 0 || len(p.ids) != 0 {
		t.Errorf("past the bound: %d ids, all %v; want every task", len(ids), all)
	}
	p.add("")
	if _, all := p.take(); !all {
		t.Error(`add(""): not every task`)
	}
}
