package proposals_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
)

// More actions are held than one listing shows (MaxHeldListed): the page
// says how many there are and where the next starts, the next page holds
// the rest, and a task's own listing pages too; before, the listing was
// cut at the oldest 1,000 without a word.
func TestHeldPageCountsAndPages(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	task, ids := r.twoHeld(t)
	const others = proposals.MaxHeldListed
	for i := range others {
		name := fmt.Sprintf("f%d.txt", i)
		if err := os.WriteFile(r.file(name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		r.send(t, r.svc, "", [2]string{"DELETE_FILE", "/sandbox/" + name})
	}
	all := others + 2
	first, err := r.props.HeldPage(ctx, proposals.HeldQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Actions) != proposals.MaxHeldListed || first.Total != all || first.Next != first.Actions[len(first.Actions)-1].ActionID {
		t.Fatalf("first page: %d actions, total %d, next %q; want %d, %d, the last listed", len(first.Actions), first.Total, first.Next, proposals.MaxHeldListed, all)
	}
	if first.Actions[0].ActionID != ids[0] || first.Actions[1].ActionID != ids[1] {
		t.Fatalf("the page does not start with the oldest: %s %s", first.Actions[0].ActionID, first.Actions[1].ActionID)
	}
	rest, err := r.props.HeldPage(ctx, proposals.HeldQuery{After: first.Next})
	if err != nil || len(rest.Actions) != all-proposals.MaxHeldListed || rest.Total != all || rest.Next != "" {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	seen := map[string]bool{}
	for _, p := range append(first.Actions, rest.Actions...) {
		if seen[p.ActionID] {
			t.Fatalf("%s listed twice", p.ActionID)
		}
		seen[p.ActionID] = true
	}
	one, err := r.props.HeldPage(ctx, proposals.HeldQuery{Task: task.ID, Limit: 1})
	if err != nil || len(one.Actions) != 1 || one.Actions[0].ActionID != ids[0] || one.Total != 2 || one.Next != ids[0] {
		t.Fatalf("the task's first page of one: %+v %v", one, err)
	}
	two, err := r.props.HeldPage(ctx, proposals.HeldQuery{Task: task.ID, After: one.Next, Limit: 1})
	if err != nil || len(two.Actions) != 1 || two.Actions[0].ActionID != ids[1] || two.Total != 2 || two.Next != "" {
		t.Fatalf("the task's second page: %+v %v", two, err)
	}
	if _, err := r.props.HeldPage(ctx, proposals.HeldQuery{After: "nope"}); !errors.Is(err, executor.ErrNoAction) {
		t.Fatalf("a page after an unknown action: %v", err)
	}
}

// A page bounded by its diffs' bytes (MaxDiff) ends before the action
// whose diff would pass the bound, says so, and the next page starts
// there; its first action is listed whatever its diff's size.
func TestHeldPageDiffBound(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	for i := range 4 {
		name := fmt.Sprintf("big%d.txt", i)
		if err := os.WriteFile(r.file(name), []byte(strings.Repeat("a line\n", 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
		r.send(t, r.svc, "", [2]string{"DELETE_FILE", "/sandbox/" + name})
	}
	all, err := r.props.HeldPage(ctx, proposals.HeldQuery{})
	if err != nil || len(all.Actions) != 4 || all.DiffBound {
		t.Fatalf("unbounded: %+v %v", all, err)
	}
	one := len(all.Actions[0].Diff)
	for _, c := range []struct {
		max, listed int
	}{{2*one + 1, 2}, {2 * one, 2}, {3*one - 1, 2}, {one, 1}, {one - 1, 1}, {1, 1}} {
		page, err := r.props.HeldPage(ctx, proposals.HeldQuery{MaxDiff: c.max})
		if err != nil || len(page.Actions) != c.listed || !page.DiffBound || page.Total != 4 || page.Next != all.Actions[c.listed-1].ActionID {
			t.Fatalf("MaxDiff %d: %d listed, bound %v, next %q (%v); want %d, the last listed next", c.max, len(page.Actions), page.DiffBound, page.Next, err, c.listed)
		}
		rest, err := r.props.HeldPage(ctx, proposals.HeldQuery{After: page.Next})
		if err != nil || len(rest.Actions) != 4-c.listed || rest.Actions[0].ActionID != all.Actions[c.listed].ActionID {
			t.Fatalf("MaxDiff %d: the next page: %+v %v", c.max, rest, err)
		}
	}
	if page, err := r.props.HeldPage(ctx, proposals.HeldQuery{MaxDiff: 4 * one}); err != nil || len(page.Actions) != 4 || page.DiffBound || page.Next != "" {
		t.Fatalf("MaxDiff of all four: %+v %v", page, err)
	}
	// The limit and the bound met at once: the limit ended the page.
	if page, err := r.props.HeldPage(ctx, proposals.HeldQuery{Limit: 2, MaxDiff: 2 * one}); err != nil || len(page.Actions) != 2 || page.DiffBound || page.Next != all.Actions[1].ActionID {
		t.Fatalf("Limit 2, MaxDiff of two: %+v %v", page, err)
	}
}
