package tasks

import (
	"context"
	"sync"
	"testing"
	"time"
)

func statusEvent(id string, v int64, st State) Event {
	return Event{TaskID: id, Version: v, Kind: EventStatus, Status: &Status{State: st}}
}

func TestBrokerDelivers(t *testing.T) {
	b := NewBroker(8)
	ctx := context.Background()
	a1, a2 := b.Subscribe(ctx, "a"), b.Subscribe(ctx, "a")
	other := b.Subscribe(ctx, "b")
	b.Publish(statusEvent("a", 2, StateWorking))
	b.Publish(Event{TaskID: "a", Version: 3, Kind: EventArtifact, Artifact: &Artifact{ArtifactID: "x"}})
	b.Publish(statusEvent("a", 3, StateWorking)) // not above 3: not delivered again
	for _, ch := range []<-chan Event{a1, a2} {
		if ev := <-ch; ev.Version != 2 || ev.Kind != EventStatus {
			t.Fatalf("first event %+v", ev)
		}
		if ev := <-ch; ev.Version != 3 || ev.Kind != EventArtifact {
			t.Fatalf("second event %+v", ev)
		}
		if len(ch) != 0 {
			t.Fatalf("%d more events", len(ch))
		}
	}
	if len(other) != 0 {
		t.Fatal("an event of task a reached task b's subscriber")
	}

	// The final event ends every subscription of the task.
	b.Publish(statusEvent("a", 4, StateCompleted))
	for _, ch := range []<-chan Event{a1, a2} {
		if ev, ok := <-ch; !ok || !ev.Final() {
			t.Fatalf("final event %+v, %v", ev, ok)
		}
		if _, ok := <-ch; ok {
			t.Fatal("channel open after the final event")
		}
	}
	if b.Subscribers("a") != 0 || b.Subscribers("b") != 1 {
		t.Fatalf("subscribers a=%d b=%d", b.Subscribers("a"), b.Subscribers("b"))
	}
}

func TestBrokerDropsStalledSubscriber(t *testing.T) {
	b := NewBroker(2)
	ctx := context.Background()
	stalled := b.Subscribe(ctx, "t")
	live := b.Subscribe(ctx, "t")
	var got []int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range live {
			got = append(got, ev.Version)
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := int64(1); v <= 100; v++ {
			b.Publish(statusEvent("t", v, StateWorking))
			// Let the live reader keep up; the stalled one never reads.
			for b.Subscribers("t") > 0 && len(live) > 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
		b.Publish(statusEvent("t", 101, StateCompleted))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked on a stalled subscriber")
	}
	wg.Wait()
	if len(got) != 101 || got[100] != 101 {
		t.Fatalf("live subscriber got %d events (last %v)", len(got), got[len(got)-1:])
	}
	// The stalled one received its buffer's worth, then was dropped.
	n := 0
	for range stalled {
		n++
	}
	if n != 2 {
		t.Fatalf("stalled subscriber got %d events before its channel closed, want 2", n)
	}
}

func TestBrokerContextEndsSubscription(t *testing.T) {
	b := NewBroker(0)
	ctx, cancel := context.WithCancel(context.Background())
	ch := b.Subscribe(ctx, "t")
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("event after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed when its context ended")
	}
	if b.Subscribers("t") != 0 {
		t.Fatal("subscription kept")
	}
	b.Publish(statusEvent("t", 1, StateWorking)) // no panic on a closed channel

	// A context already done ends the subscription at once.
	ch = b.Subscribe(ctx, "t")
	if _, ok := <-ch; ok {
		t.Fatal("event on a done context")
	}
}

func TestBrokerConcurrent(t *testing.T) {
	b := NewBroker(4)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			ch := b.Subscribe(ctx, "t")
			for range i {
				select {
				case <-ch:
				case <-time.After(time.Millisecond):
				}
			}
			cancel()
		}()
		go func() {
			defer wg.Done()
			for v := range 200 {
				b.Publish(statusEvent("t", int64(i*1000+v), StateWorking))
			}
		}()
	}
	wg.Wait()
}
