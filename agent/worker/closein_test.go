package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
)

// A worker that closes its input and runs on is stopped at the next step
// with a reason that says so: before, it was told it "closed its output",
// which it had not, and the operator looked at the wrong end.
func TestWorkerThatClosedItsInput(t *testing.T) {
	p, al, pidfile := pool(t, "closein.py", nil)
	if _, err := p.Complete(context.Background(), prompt("job-1", 0, "")); err != nil {
		t.Fatal(err)
	}
	// The observation's write fails: the worker closed its input before
	// it answered.
	_, err := p.Complete(context.Background(), prompt("job-1", 1, `{"outcome":"completed"}`))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "closed its input") || !strings.HasSuffix(err.Error(), "(crash)") {
		t.Fatalf("err = %v; want the worker named as having closed its input (crash)", err)
	}
	gone(t, pids(t, pidfile))
	if es := al.Entries(); len(es) != 1 || !strings.Contains(es[0].Reason, "closed its input") {
		t.Fatalf("audit: %+v", es)
	}
}
