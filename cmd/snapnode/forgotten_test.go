package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// job history, replay and show of a job its node was forgetting when it
// stopped (its history half deleted) say the job was forgotten: before,
// the history read as tampered with.
func TestJobForgottenHalfway(t *testing.T) {
	dir := t.TempDir()
	db, st, j, t0 := newJob(t, dir, "job-forgotten")
	writeSteps(t, st, j, t0, 5, 10, "")
	for _, q := range []string{`UPDATE agent_jobs SET status = 'SUCCESS', forgotten = 1`, `DELETE FROM agent_interactions WHERE seq < 3`} {
		if _, err := db.W.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, args := range [][]string{{"history"}, {"history", "--format", "text"}, {"replay"}, {"show"}} {
		var out, errOut bytes.Buffer
		args := append(append([]string{"job"}, args...), "--data-dir", dir, "job-forgotten")
		code := run(args, strings.NewReader(""), &out, &errOut)
		if code != exitFail || !strings.Contains(errOut.String(), "job-forgotten was forgotten") {
			t.Errorf("%s: exit %d: %s%s", strings.Join(args[:len(args)-3], " "), code, out.String(), errOut.String())
		}
	}
}
