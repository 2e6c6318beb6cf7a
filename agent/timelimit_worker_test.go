package agent_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/audit/audittest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A real worker still at work when the job reaches its time limit is
// stopped there, and the job halts HALTED_TIME; the audit log says the
// job's time limit stopped it, not that the worker broke its protocol
// (before: a `worker_stopped` "timeout" violation blamed the worker).
func TestWorkerStoppedAtTheTimeLimitIsNotAViolation(t *testing.T) {
	al := &audittest.Recorder{}
	p := pythonWorker(t, "hang.py", worker.Config{StepTimeout: time.Hour, Audit: al})
	r := newRig(t, testdb.SQLite(t))
	task := r.send(t, "go")
	got := r.runWith(t, func(cfg *agent.Config) { cfg.MaxTime, cfg.RequestTimeout = 3*time.Second, time.Hour }, p, task.ID,
		tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "max_time_minutes") {
		t.Fatalf("task %s %q: want failed at max_time_minutes", got.Status.State, got.Status.Message)
	}
	es := al.Entries()
	if len(es) != 1 {
		t.Fatalf("audit: %+v; want one entry for the stopped worker", es)
	}
	e := es[0]
	if e.Task != task.ID || e.Decision != "worker_stopped" || e.Step == audit.StepRejected ||
		!strings.Contains(e.Reason, "time limit") || strings.Contains(string(e.Detail), `"rule":"timeout"`) {
		t.Fatalf("audit entry %+v (detail %s): want the job's time limit named, not a worker's violation", e, e.Detail)
	}
	if p.Running() != 0 {
		t.Errorf("%d workers still running", p.Running())
	}
}

// pythonWorker starts a real worker, the script of worker/testdata run
// by python3, with cfg's settings besides its command, folders and
// environment; it is closed when the test ends. The test is skipped
// where python3 is not installed.
func pythonWorker(t *testing.T, script string, cfg worker.Config) *worker.Pool {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the test runs a real worker")
	}
	path, err := filepath.Abs(filepath.Join("worker", "testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Command, cfg.Dir, cfg.Sandbox = []string{py, path}, t.TempDir(), t.TempDir()
	cfg.Env = []string{"PYTHONDONTWRITEBYTECODE=1"}
	p, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
