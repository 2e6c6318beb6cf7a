package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
)

// The stores an operator command opens warn on its stderr, at warn level
// as the client commands' warnings go, of the records of work elsewhere
// to cancel that a write of the job store drops (agent.Store.SetLogger):
// they were opened without a logger, so such a drop said nothing. No
// command writes the job store today; this opens it as `snapnode job
// list` does and drops a record past the per-job bound through it.
func TestOperatorStoresWarnOnStderr(t *testing.T) {
	dir, _ := jobDataDir(t)
	var out, errOut bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	fs, cfg := c.nodeFlagSet("job list")
	if _, code, done := c.parse(fs, []string{"--data-dir", dir}, 0); done {
		t.Fatalf("parse: exit %d: %s", code, errOut.String())
	}
	st, closeDB, code, ok := c.openJobStore(fs, cfg)
	if !ok {
		t.Fatalf("open the job store: exit %d: %s", code, errOut.String())
	}
	defer closeDB()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if _, err := st.Create(ctx, &agent.Job{TaskID: "j", Requester: "bc1p-requester", Status: agent.Pending, RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Claim(ctx, "j", "h", t0, t0.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	for i := range agent.MaxCancelsPerJob + 1 {
		if err := st.KeepSentCanceling(ctx, "j", "h", []byte(fmt.Sprint("next ", i)), []byte(fmt.Sprint("work ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := errOut.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "dropped records of work elsewhere to cancel") || !strings.Contains(got, "task=j") {
		t.Errorf("stderr = %q, want the store's warning of the dropped record", got)
	}
}
