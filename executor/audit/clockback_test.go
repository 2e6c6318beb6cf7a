package audit

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// A seal dated by a clock moved back (by mistake, or by whoever steers the
// host's time) prunes nothing sealed after a seal that is not yet past
// the retention: only a prefix whose every seal is. Before, the newest
// seal dated past the retention set the cut, and the clock put right
// pruned at once the day-old entries below it.
func TestPruneClockMovedBack(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{Now: clk.Now, Signer: testSigner(t, "11"), Retain: 30 * 24 * time.Hour})
	fill(t, l, 3)
	if _, err := l.Seal(ctx); err != nil { // entry 4, now
		t.Fatal(err)
	}
	clk.Advance(-40 * 24 * time.Hour) // the clock moved back
	fill(t, l, 3)
	if _, err := l.Seal(ctx); err != nil { // entry 8, dated 40 days ago
		t.Fatal(err)
	}
	clk.Advance(40*24*time.Hour + time.Hour) // put right: an hour later
	n, err := l.Prune(ctx)
	if err != nil || n != 0 {
		t.Fatalf("Prune: %d removed, %v; want none: the seal of entry 4 is an hour old", n, err)
	}
	clk.Advance(31 * 24 * time.Hour) // both seals past the retention
	if n, err := l.Prune(ctx); err != nil || n != 7 {
		t.Fatalf("Prune a month on: %d removed, %v; want 7", n, err)
	}
	if _, err := l.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
