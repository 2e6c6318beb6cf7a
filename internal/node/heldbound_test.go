package node

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/proposals"
)

// pendingExec lists its pending actions, and nothing else.
type pendingExec struct {
	proposals.Executor
	held []executor.Pending
}

func (e pendingExec) PendingPage(_ context.Context, _, _ string, limit, _ int) ([]executor.Pending, int, error) {
	return e.held[:min(limit, len(e.held))], len(e.held), nil
}

// An action whose diff alone, spelled out, passes the admin socket's
// bound (a composite's changes of up to 64 files of 1 MiB each are one
// diff) is still listed by held --diff, its diff cut and the bytes left
// out counted, the page's next one after it: the answer fits the socket.
// Before, the first action was listed whatever its size, and the answer,
// over the bound, was refused: held --diff failed on that page, every
// time.
func TestHeldDiffOverTheBound(t *testing.T) {
	line := strings.Repeat("\x01", 1023) + "\n"
	big := strings.Repeat("-"+line, 6<<10) // 6 MiB; 8 bytes a byte spelled out
	p, err := proposals.New(proposals.Config{Executor: pendingExec{held: []executor.Pending{
		{TaskID: "t1", ActionID: "a1", Action: "MULTI_STEP_COMPOSITE", Diff: big},
		{TaskID: "t1", ActionID: "a2", Action: "DELETE_FILE", Diff: "-x\n"},
	}}, Tasks: struct{ proposals.Tasks }{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := adminHandler{props: p}.Held(context.Background(), "", "", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > admin.MaxResponse-1024 {
		t.Fatalf("held --diff answers %d bytes, over the socket's %d", len(b), admin.MaxResponse)
	}
	page := res.(heldList)
	if len(page.Actions) == 0 || page.Actions[0].Action != "a1" || page.Next != "a1" || !page.DiffsBounded {
		t.Fatalf("page: %d actions, next %q, bounded %v; want a1 listed first, next a1", len(page.Actions), page.Next, page.DiffsBounded)
	}
	a := page.Actions[0]
	if a.DiffSum != proposals.DiffSum(big) || a.DiffCut <= 0 || !strings.HasPrefix(executor.Visible(big), a.Diff) {
		t.Fatalf("a1: %d bytes of diff shown, %d counted out, sum %s", len(a.Diff), a.DiffCut, a.DiffSum)
	}
}
