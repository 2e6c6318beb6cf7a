package node_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
)

// Two copies of one signed approval sent at once (both held at
// proposals.PointApproving until the other is there, then let go
// together) end with the action approved once: one copy carries it out,
// the other is answered as the duplicate, straight away or once its 5003
// (the approval under way, the copy's id unspent) is retried, as SNAP
// asks. Were the refusal of the copy that lost the race to spend the id,
// the winner's claim would find its record taken and nothing would be
// decided at all.
func TestDecisionCopiesRace(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		var (
			mu      sync.Mutex
			arrived int
			both    = make(chan struct{})
		)
		pause := node.WithPause(func(point string) {
			if point != proposals.PointApproving {
				return
			}
			mu.Lock()
			arrived++
			n := arrived
			mu.Unlock()
			if n == 2 {
				close(both)
			}
			if n <= 2 {
				<-both
			}
		})
		r := newHeldRig(t, dsn, pause)
		n := r.n
		raw := r.send(t, r.op, decisionMsg(r.held.ID, map[string]any{"decision": "approve"}))

		answers := make([]map[string]any, 2)
		retried := make([]int, 2)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				for {
					p := postSNAP(t, n, raw)
					if errorCode(p) != snap.CodeServiceUnavailable || retried[i] == 100 {
						answers[i] = p
						return
					}
					retried[i]++
				}
			})
		}
		wg.Wait()
		carried, dups := 0, 0
		for i, p := range answers {
			switch {
			case p["deduplicated"] == true || errorCode(p) == snap.CodeDuplicateMessage:
				dups++
			case errorCode(p) == 0 && taskOf(t, p).Status.State == "completed":
				carried++
			default:
				t.Errorf("copy %d (after %d retries on 5003): %v", i, retried[i], p)
			}
		}
		if carried != 1 || dups != 1 {
			t.Fatalf("%d copies carried out, %d duplicates (retries on 5003: %v); want 1 and 1", carried, dups, retried)
		}
		if _, err := os.Stat(filepath.Join(r.dataDir, "sandbox", "a.txt")); !os.IsNotExist(err) {
			t.Fatalf("the file is still there: %v", err)
		}
		var decided int
		if err := n.DB.R.QueryRowContext(context.Background(), n.DB.Dialect.Rebind(`SELECT COUNT(*) FROM audit_log WHERE step = 'confirmed'`)).Scan(&decided); err != nil {
			t.Fatal(err)
		}
		if decided != 1 {
			t.Fatalf("%d approvals audited; want 1", decided)
		}
		t.Logf("retries on 5003: %v", retried)
	})
}
