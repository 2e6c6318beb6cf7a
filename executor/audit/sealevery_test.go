package audit

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// With SealEvery, RunSealer seals once that many entries followed the
// last seal, without waiting for its next tick: the entries a cut can
// hide are bounded by a count as well as by the ticks' interval. Fewer
// ask for no seal.
func TestRunSealerSealsEveryN(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Signer: testSigner(t, "11"), SealEvery: 4})
	sealed := make(chan Seal, 4)
	done := make(chan error, 1)
	go func() {
		done <- l.RunSealer(ctx, make(chan time.Time), 0, func(s Seal, err error) {
			if err != nil {
				t.Errorf("seal: %v", err)
			}
			sealed <- s
		})
	}()
	wait := func(want Anchor) {
		t.Helper()
		select {
		case s := <-sealed:
			if s.Head != want {
				t.Fatalf("sealed %+v; want the head %+v", s.Head, want)
			}
		case <-time.After(10 * time.Second): // a guard, not a timing
			t.Fatalf("no seal after %d entries", want.Seq)
		}
	}
	es := fill(t, l, 3)
	if len(l.due) != 0 {
		t.Fatal("a seal asked for after 3 entries of 4")
	}
	es = append(es, fill(t, l, 1)...)
	wait(Anchor{4, es[3].Hash})
	es = fill(t, l, 4) // the seal is not one of them
	wait(Anchor{9, es[3].Hash})
	cancel()
	<-done
	rep, err := l.Verify(context.Background())
	if err != nil || rep.Seals != 2 || rep.Unsealed != 0 {
		t.Fatalf("Verify: %d seals, %d unsealed, %v", rep.Seals, rep.Unsealed, err)
	}
}
