package proposals_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
