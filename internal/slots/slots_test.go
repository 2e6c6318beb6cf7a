package slots

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// claim is one Acquire running in its own goroutine.
type claim struct {
	release func()
	err     error
	done    chan struct{}
}

func acquire(ctx context.Context, p *Pool, c Claim) *claim {
	r := &claim{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.release, r.err = p.Acquire(ctx, c)
	}()
	return r
}

func (r *claim) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func newcomer(i int) Claim {
	return Claim{Identity: fmt.Sprint("new-", i), Key: fmt.Sprint("newkey-", i)}
}
func known(i int) Claim {
	return Claim{Identity: fmt.Sprint("known-", i), Key: fmt.Sprint("knownkey-", i), Known: true}
}

func wantFull(t *testing.T, err error, scope string, limit int) {
	t.Helper()
	var full *Full
	if !errors.As(err, &full) || full.Scope != scope || full.Limit != limit {
		t.Fatalf("got %v, want a *Full of scope %q, limit %d", err, scope, limit)
	}
}

// A flood of newcomers holding and waiting for every slot they may take
// does not keep a known claimant out: it takes a free slot at once, and
// when the node is full it is served before the newcomers that waited
// longer.
func TestKnownBeforeNewcomers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := New(Limits{Max: 4, MaxNewcomers: 2, Wait: 10 * time.Second, MaxWaiting: 8})
		var held []func()
		for i := range 2 {
			r, err := p.Acquire(ctx, newcomer(i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, r)
		}
		// One after the other: the queue's order is the order they came.
		waiting := []*claim{acquire(ctx, p, newcomer(2))}
		synctest.Wait()
		waiting = append(waiting, acquire(ctx, p, newcomer(3)))
		synctest.Wait()
		if s := p.Stats(); s.WaitingNewcomers != 2 || s.Open != 2 {
			t.Fatalf("stats %+v: want 2 open, 2 newcomers waiting", s)
		}
		// Free slots go to known claimants at once.
		k0, err := p.Acquire(ctx, known(0))
		if err != nil {
			t.Fatal(err)
		}
		k1, err := p.Acquire(ctx, known(1))
		if err != nil {
			t.Fatal(err)
		}
		// The node is full: a known claimant waits too, ahead of them.
		k2 := acquire(ctx, p, known(2))
		synctest.Wait()
		if k2.finished() {
			t.Fatalf("known claim on a full node: %v, want it waiting", k2.err)
		}
		held[0]() // a newcomer's slot frees: the known claimant gets it
		synctest.Wait()
		if !k2.finished() || k2.err != nil || waiting[0].finished() {
			t.Fatalf("after a slot freed: known finished %v (%v), first newcomer finished %v", k2.finished(), k2.err, waiting[0].finished())
		}
		k0() // a known slot frees and no known claim waits: the first newcomer gets it
		synctest.Wait()
		if !waiting[0].finished() || waiting[0].err != nil || waiting[1].finished() {
			t.Fatalf("newcomers served out of turn: first %v %v, second %v", waiting[0].finished(), waiting[0].err, waiting[1].finished())
		}
		k1() // a slot is free, but the newcomers' share is full: the second waits on
		synctest.Wait()
		if waiting[1].finished() {
			t.Fatalf("a newcomer took a slot past the newcomers' share: %v", waiting[1].err)
		}
		// The second newcomer's time runs out: the refusal it gets without a wait.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if !waiting[1].finished() {
			t.Fatal("a newcomer still waits past Wait")
		}
		wantFull(t, waiting[1].err, ScopeNewcomers, 2)
		held[1]()
		k2.release()
		waiting[0].release()
		waiting[0].release() // a second call does nothing
		if s := p.Stats(); s != (Stats{}) {
			t.Fatalf("after every slot came back: %+v", s)
		}
	})
}

// A claim past its identity's or its key's share is refused at once,
// waiting claims included in the share; a claim that finds the node full
// and the queue full is refused at once too.
func TestBoundsRefuseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := New(Limits{Max: 3, PerIdentity: 1, PerKey: 2, Wait: time.Minute, MaxWaiting: 1})
		a := Claim{Identity: "bc1pa", Key: "k", Known: true}
		if _, err := p.Acquire(ctx, a); err != nil {
			t.Fatal(err)
		}
		_, err := p.Acquire(ctx, a)
		wantFull(t, err, ScopeIdentity, 1)
		// The same key's other address shares the key's bound.
		if _, err := p.Acquire(ctx, Claim{Identity: "tb1pa", Key: "k", Known: true}); err != nil {
			t.Fatal(err)
		}
		_, err = p.Acquire(ctx, Claim{Identity: "bc1pa2", Key: "k", Known: true})
		wantFull(t, err, ScopeKey, 2)
		if _, err := p.Acquire(ctx, known(0)); err != nil {
			t.Fatal(err)
		}
		w := acquire(ctx, p, known(1)) // the node is full: waits
		synctest.Wait()
		_, err = p.Acquire(ctx, known(2)) // the known queue holds one
		wantFull(t, err, ScopeNode, 3)
		// A newcomer waits behind the known claim, and its queue has
		// room: it waits its minute, as the known claim does.
		_, err = p.Acquire(ctx, newcomer(0))
		wantFull(t, err, ScopeNode, 3)
		synctest.Wait()
		if !w.finished() {
			t.Fatal("the known claim still waits after its minute")
		}
		wantFull(t, w.err, ScopeNode, 3)
	})
}

// With no wait (Wait 0) a claim that finds no slot is refused at once.
func TestNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := New(Limits{Max: 2, MaxNewcomers: 1})
		if _, err := p.Acquire(ctx, newcomer(0)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := p.Acquire(ctx, newcomer(1))
		wantFull(t, err, ScopeNewcomers, 1)
		if time.Since(start) != 0 {
			t.Fatalf("waited %v", time.Since(start))
		}
	})
}

// A waiting claim whose context ends leaves the queue and returns the
// context's error; its identity and key are no longer counted.
func TestWaitCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Limits{Max: 1, Wait: time.Minute, MaxWaiting: 4})
		if _, err := p.Acquire(context.Background(), known(0)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := acquire(ctx, p, newcomer(1))
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !w.finished() || !errors.Is(w.err, context.Canceled) {
			t.Fatalf("finished %v, err %v; want context.Canceled", w.finished(), w.err)
		}
		if s := p.Stats(); s != (Stats{Open: 1, Identities: 1, Keys: 1}) {
			t.Fatalf("stats %+v", s)
		}
	})
}
