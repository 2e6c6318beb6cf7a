package audit

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// KeepOpen stops the retention before the first entry of an action still
// open, asking only about the entries of the chunk it would drop, and
// goes on with no further chunk; MaxEntries, a bound on the whole log,
// does not wait for it. Seals signed by the node's key decide the age, as
// without it.
func TestPruneKeepOpen(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		l := openLog(t, openDB(t, dsn), Options{Now: clk.Now, Retain: time.Hour, Signer: testSigner(t, "11")})
		l.pruneChunk = 7
		const open = 10 // the first entry of the action still open
		var asked [][2]int64
		l.KeepOpen(func(_ context.Context, _ *sql.Tx, from, to int64) (int64, error) {
			asked = append(asked, [2]int64{from, to})
			if from <= open && open <= to {
				return open, nil
			}
			return 0, nil
		})
		fill(t, l, 20)
		if _, err := l.Seal(ctx); err != nil { // seq 21
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)
		n, err := l.Prune(ctx)
		if err != nil || n != 9 {
			t.Fatalf("Prune removed %d, %v; want 9 (seq 1…9)", n, err)
		}
		if len(asked) != 2 || asked[0] != [2]int64{1, 7} || asked[1] != [2]int64{8, 14} {
			t.Fatalf("KeepOpen asked about %v; want [[1 7] [8 14]]", asked)
		}
		if n, err := l.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("a second Prune removed %d, %v; want none while the action is open", n, err)
		}
		if _, err := l.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		l.opts.MaxEntries = 5
		if _, err := l.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.First <= open {
			t.Fatalf("with MaxEntries the chain starts at %d; want past the open action's %d", rep.First, open)
		}
	})
}
