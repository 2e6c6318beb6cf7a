package audit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// waitPending spins until n appends wait in l's queue.
func waitPending(l *Log, n int) {
	for {
		l.comb.mu.Lock()
		k := len(l.comb.pending)
		l.comb.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

// Appends that arrive while one is written go into one transaction.
func TestCombinedAppends(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testdb.SQLite(t))
	l := openLog(t, db, Options{})
	fill(t, l, 1)
	// Pretend a write is in progress, queue five appends (one a batch of
	// three), then end the pretended write.
	l.comb.mu.Lock()
	l.comb.busy = true
	l.comb.mu.Unlock()
	type result struct {
		es  []Entry
		err error
	}
	results := make(chan result, 5)
	for i := range 5 {
		go func() {
			in := []Entry{sample(i)}
			if i == 2 {
				in = append(in, sample(10), sample(11))
			}
			es, err := l.AppendBatch(ctx, in)
			results <- result{es, err}
		}()
	}
	waitPending(l, 5)
	_, writesBefore := db.GroupCommits()
	l.comb.handOff()
	var seqs []int64
	for range 5 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		for k, e := range r.es {
			if k > 0 && e.Seq != r.es[k-1].Seq+1 {
				t.Errorf("a batch's entries are not consecutive: %d after %d", e.Seq, r.es[k-1].Seq)
			}
			seqs = append(seqs, e.Seq)
		}
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []int64{2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("seqs %v", seqs)
	}
	if _, writes := db.GroupCommits(); writes-writesBefore != 1 {
		t.Fatalf("%d transactions for the queued appends, want 1", writes-writesBefore)
	}
	if _, err := l.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	l.comb.mu.Lock()
	defer l.comb.mu.Unlock()
	if l.comb.busy || len(l.comb.pending) != 0 {
		t.Fatalf("combiner left busy %v with %d waiting", l.comb.busy, len(l.comb.pending))
	}
}

// A waiting append whose context ends leaves the queue and is not
// written; the others are.
func TestCombinedAppendCanceled(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{})
	l.comb.mu.Lock()
	l.comb.busy = true
	l.comb.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	canceled := make(chan error, 1)
	go func() {
		_, err := l.Append(cctx, sample(0))
		canceled <- err
	}()
	waitPending(l, 1)
	kept := make(chan error, 1)
	go func() {
		e, err := l.Append(ctx, sample(1))
		if err == nil && e.Seq != 1 {
			err = errors.New("kept append is not entry 1")
		}
		kept <- err
	}()
	waitPending(l, 2)
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled append: %v", err)
	}
	l.comb.handOff()
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	rep, err := l.Verify(ctx)
	if err != nil || rep.Entries != 1 {
		t.Fatalf("%+v, %v; want the one append kept", rep, err)
	}
}
