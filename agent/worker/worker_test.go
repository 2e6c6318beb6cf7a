package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/audit/audittest"
)

// python3 returns the interpreter, or skips the test.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the worker tests run real Python workers")
	}
	// The interpreter itself, not a version manager's shim (which would
	// add variables of its own to the worker's environment).
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// pool runs the testdata script; it returns the pool, its audit log and
// the file where the script records its pids.
func pool(t *testing.T, script string, mutate func(*worker.Config)) (*worker.Pool, *audittest.Recorder, string) {
	t.Helper()
	py := python3(t)
	abs, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "pids")
	al := &audittest.Recorder{}
	cfg := worker.Config{Command: []string{py, abs}, Dir: t.TempDir(), Sandbox: t.TempDir(),
		Env: []string{"PIDFILE=" + pidfile, "PYTHONDONTWRITEBYTECODE=1"}, StepTimeout: 20 * time.Second, Audit: al}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, al, pidfile
}

func request(job string) *agent.JobRequest {
	return &agent.JobRequest{JobID: job, Phase: "work", ContextFiles: []string{}, SystemPrompt: "the node's rules",
		TaskDescription: "write a.md", Metadata: agent.JobRequestMetadata{MaxSteps: 5, AcceptedFormats: agent.AcceptedFormats()}}
}

func prompt(job string, step int, obs string) agent.Prompt {
	msgs := []agent.ChatMessage{{Role: agent.RoleSystem, Content: "the node's rules"}, {Role: agent.RoleUser, Content: "write a.md"}}
	if obs != "" {
		msgs = append(msgs, agent.ChatMessage{Role: agent.RoleAssistant, Content: "{}"}, agent.ChatMessage{Role: agent.RoleUser, Content: obs})
	}
	return agent.Prompt{Messages: msgs, Job: request(job), Step: step}
}

// pids are the pids the script recorded.
func pids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the worker recorded no pid: %v", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// gone fails unless every process of pids is gone: the worker itself
// reaped (not even a zombie), and what it started killed (a zombie left
// to init, which reaps it, is dead).
func gone(t *testing.T, ps []int) {
	t.Helper()
	for _, pid := range ps {
		// A process killed by a signal dies when the kernel next runs
		// it: on a busy machine its state may still read R for a moment
		// after kill returned. It must be gone (or a zombie another
		// process reaps) within a few seconds.
		var st []byte
		for deadline := time.Now().Add(5 * time.Second); ; {
			var err error
			if st, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
				st = nil
				break
			}
			// pid (comm) state ppid …
			f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
			if len(f) > 1 && f[0] == "Z" && f[1] != strconv.Itoa(os.Getpid()) {
				st = nil
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if st != nil {
			t.Errorf("process %d outlived its worker: %s", pid, st)
		}
	}
}

// A worker that breaks the protocol is stopped with its whole process
// group, leaves no zombie, is audited, and its error names the rule. An
// answer refused (garbage, a line over the bound) is an
// agent.AnsweredError of the bytes it sent (the bound when it sent
// more), which the runtime counts against the job's budget as a model
// server's refused answer; before, it carried nothing.
func TestViolations(t *testing.T) {
	cases := []struct {
		script, rule, want string
		steps              int // answers before the violation
		mutate             func(*worker.Config)
		answered           int // the refused answer's bytes; 0: none
	}{
		{"crash.py", "crash", "exited (exit status 3) before answering step 0; its last error output: worker: out of ideas", 0, nil, 0},
		// The end of a long error output is what names the failure.
		{"crashlong.py", "crash", `, in step File "worker.py", line 39, in step ValueError: the plan has no step`, 0, nil, 0},
		{"hang.py", "timeout", "did not answer step 0 within its step time-out of 2s", 0,
			func(c *worker.Config) { c.StepTimeout = 2 * time.Second }, 0}, // time for the worker to start and record its pids
		{"garbage.py", "object", "the worker wrote garbage: the answer is not a single JSON object", 0, nil, len("Sure! I will write the file now.")},
		// The extra lines are caught at a later step: which one depends on
		// when the pipe delivers them, so the flood may answer a few steps.
		{"flood.py", "flood", "a line it was not asked for", -10, nil, 0},
		{"longline.py", "flood", "the worker flooded its output: a line of the worker is over 4096 bytes", 0,
			func(c *worker.Config) { c.MaxLineBytes = 4096 }, 4096},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			p, al, pidfile := pool(t, c.script, c.mutate)
			var err error
			// steps < 0: the violation comes within -steps steps, at the
			// latest; the steps before it are answered.
			last, upTo := c.steps, c.steps < 0
			if upTo {
				last = -c.steps
			}
			for step := 0; step <= last; step++ {
				obs := ""
				if step > 0 {
					obs = `{"outcome":"completed"}`
				}
				_, err = p.Complete(context.Background(), prompt("job-1", step, obs))
				if upTo && err != nil {
					break
				}
				if !upTo && step < c.steps && err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "("+c.rule+")") {
				t.Fatalf("err = %v; want agent.ErrWorkerFailed with %q (%s)", err, c.want, c.rule)
			}
			var ae *agent.AnsweredError
			if got := errors.As(err, &ae); got != (c.answered > 0) || got && ae.AnswerBytes != c.answered {
				t.Errorf("err = %v (%T); want an agent.AnsweredError of %d bytes (0: none)", err, err, c.answered)
			}
			gone(t, pids(t, pidfile))
			if p.Running() != 0 {
				t.Errorf("%d workers still counted", p.Running())
			}
			es := al.Entries()
			if len(es) != 1 || es[0].Task != "job-1" || es[0].Step != audit.StepRejected || es[0].Decision != "worker_stopped" ||
				!strings.Contains(es[0].Reason, c.want) || !strings.Contains(string(es[0].Detail), `"rule":"`+c.rule+`"`) {
				t.Fatalf("audit: %+v", es)
			}
		})
	}
}

// The worker gets only the variables it is given and PATH, in its own
// directory; it reads the job request first, then observations.
func TestEnvironmentAndLines(t *testing.T) {
	t.Setenv("SNAPNODE_LLM_API_KEY", "sk-secret-of-the-node")
	t.Setenv("SNAPNODE_KEY", "the node's key")
	dir := t.TempDir()
	p, _, _ := pool(t, "env.py", func(c *worker.Config) { c.Dir, c.Env = dir, []string{"GREETING=hello"} })
	var got []map[string]any
	for step, obs := range []string{"", `{"outcome":"completed"}`} {
		comp, err := p.Complete(context.Background(), prompt("job-2", step, obs))
		if err != nil {
			t.Fatal(err)
		}
		var resp agent.AgentResponse
		if err := json.Unmarshal([]byte(comp.Text), &resp); err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal([]byte(resp.SummaryForSupervisor), &s); err != nil {
			t.Fatalf("summary %q: %v", resp.SummaryForSupervisor, err)
		}
		got = append(got, s)
	}
	env := got[0]["env"].([]any)
	if !slices.Equal(env, []any{"GREETING", "PATH"}) {
		t.Errorf("the worker's environment has %v; want GREETING and PATH only", env)
	}
	if got[0]["cwd"] != dir {
		t.Errorf("cwd %v; want %s", got[0]["cwd"], dir)
	}
	first := got[0]["msg"].(map[string]any)
	if got[0]["first"] != true || first["job_id"] != "job-2" || first["phase"] != "work" || first["task_description"] != "write a.md" {
		t.Errorf("first line: %v", first)
	}
	second := got[1]["msg"].(map[string]any)
	if got[1]["first"] != false || second["step"] != float64(1) || second["observation"] != `{"outcome":"completed"}` {
		t.Errorf("second line: %v", second)
	}
}

// A pool keeps at most MaxProcs workers: a job's first step waits for a
// slot; ending a job frees its slot.
func TestMaxProcs(t *testing.T) {
	p, _, _ := pool(t, "env.py", func(c *worker.Config) { c.MaxProcs = 1 })
	if _, err := p.Complete(context.Background(), prompt("a", 0, "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.Complete(ctx, prompt("b", 0, "")); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, agent.ErrWorkerFailed) {
		t.Fatalf("a second job with the only slot taken: %v", err)
	}
	if p.Running() != 1 {
		t.Fatalf("%d running", p.Running())
	}
	p.EndJob("a")
	if _, err := p.Complete(context.Background(), prompt("b", 0, "")); err != nil {
		t.Fatalf("after the first job ended: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	sb := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  worker.Config
		want string
	}{
		{"no command", worker.Config{}, "Command is required"},
		{"dir in the sandbox", worker.Config{Command: []string{"true"}, Sandbox: sb, Dir: filepath.Join(sb, "w")}, "want a directory outside the sandbox"},
		{"dir is the sandbox", worker.Config{Command: []string{"true"}, Sandbox: sb, Dir: sb}, "want a directory outside the sandbox"},
		{"bad variable", worker.Config{Command: []string{"true"}, Env: []string{"A B=1"}}, "command_env[0]: want NAME=value"},
		{"no value", worker.Config{Command: []string{"true"}, Env: []string{"TOKEN"}}, "command_env[0]: want NAME=value"},
	} {
		if _, err := worker.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// A job that went on before (a follow-up, a restart) starts a new worker
// with one request, which tells where the job stands; it is answered with
// one line, and the next step is an observation.
func TestResumedJob(t *testing.T) {
	p, _, _ := pool(t, "env.py", nil)
	comp, err := p.Complete(context.Background(), prompt("job-3", 4, "Message from the requester: go on"))
	if err != nil {
		t.Fatal(err)
	}
	var resp agent.AgentResponse
	var got map[string]any
	if json.Unmarshal([]byte(comp.Text), &resp) != nil || json.Unmarshal([]byte(resp.SummaryForSupervisor), &got) != nil {
		t.Fatalf("answer %s", comp.Text)
	}
	msg := got["msg"].(map[string]any)
	if got["first"] != true || !strings.HasSuffix(msg["task_description"].(string), "the latest observation:\nMessage from the requester: go on") {
		t.Fatalf("first line: %v", msg)
	}
	if _, err := p.Complete(context.Background(), prompt("job-3", 5, `{"outcome":"completed"}`)); err != nil {
		t.Fatalf("the next step: %v", err)
	}
}

// The observation is every message since the worker's last answer: the
// outcome and what the requester said meanwhile.
func TestObservationHasEverythingSinceTheAnswer(t *testing.T) {
	p, _, _ := pool(t, "env.py", nil)
	if _, err := p.Complete(context.Background(), prompt("job-4", 0, "")); err != nil {
		t.Fatal(err)
	}
	pr := prompt("job-4", 1, `{"outcome":"completed"}`)
	pr.Messages = append(pr.Messages, agent.ChatMessage{Role: agent.RoleUser, Content: "Message from the requester: also b.md"})
	comp, err := p.Complete(context.Background(), pr)
	if err != nil {
		t.Fatal(err)
	}
	var resp agent.AgentResponse
	var got map[string]any
	if json.Unmarshal([]byte(comp.Text), &resp) != nil || json.Unmarshal([]byte(resp.SummaryForSupervisor), &got) != nil {
		t.Fatalf("answer %s", comp.Text)
	}
	if obs := got["msg"].(map[string]any)["observation"]; obs != "{\"outcome\":\"completed\"}\n\nMessage from the requester: also b.md" {
		t.Fatalf("observation %q", obs)
	}
}

// A worker that never reads its input, sent a step longer than a pipe
// holds, is stopped at its step time-out like one that does not answer:
// the write does not hold the job (nor its cancel) for ever.
func TestDeafWorkerStopped(t *testing.T) {
	p, al, pidfile := pool(t, "deaf.py", func(c *worker.Config) { c.StepTimeout = 2 * time.Second })
	pr := prompt("job-1", 0, "")
	pr.Job.SystemPrompt = strings.Repeat("the node's rules, at length. ", 200<<10/29)
	done := make(chan error, 1)
	go func() {
		_, err := p.Complete(context.Background(), pr)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Complete still writing to a worker that does not read, a minute on")
	}
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "did not answer step 0 within its step time-out of 2s") {
		t.Fatalf("err = %v", err)
	}
	gone(t, pids(t, pidfile))
	if p.Running() != 0 {
		t.Errorf("%d workers still counted", p.Running())
	}
	if es := al.Entries(); len(es) != 1 || es[0].Decision != "worker_stopped" {
		t.Fatalf("audit: %+v", es)
	}
}

// A worker whose child left its process group (a session of its own) and
// holds the worker's output open is stopped all the same: stopping it
// closes the pool's end of that pipe, so neither its reader nor the pipe
// outlives the worker (before: both stayed, blocked for ever, for every
// such worker).
func TestEscapedChildDoesNotHoldTheOutput(t *testing.T) {
	pipefile := filepath.Join(t.TempDir(), "pipe")
	p, al, pidfile := pool(t, "escape.py", func(c *worker.Config) {
		c.StepTimeout = 6 * time.Second // time for the worker to start and record its pipe, on a loaded machine too
		c.Env = append(c.Env, "PIPEFILE="+pipefile)
	})
	_, err := p.Complete(context.Background(), prompt("job-1", 0, ""))
	ps := pids(t, pidfile)
	if len(ps) == 2 {
		t.Cleanup(func() { // the escaped child, out of the worker's group
			if c, err := os.FindProcess(ps[1]); err == nil {
				c.Kill()
			}
		})
	}
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.HasSuffix(err.Error(), "(timeout)") {
		t.Fatalf("err = %v; want a step time-out", err)
	}
	if len(ps) != 2 || len(al.Entries()) != 1 {
		t.Fatalf("pids %v, audit %+v", ps, al.Entries())
	}
	b, err := os.ReadFile(pipefile)
	if err != nil {
		t.Fatalf("the worker recorded no pipe: %v", err)
	}
	pipe := "pipe:[" + strings.TrimSpace(string(b)) + "]"
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == pipe {
			t.Fatalf("the node still holds the stopped worker's output (fd %s, %s): its reader is blocked for ever", fd.Name(), pipe)
		}
	}
	if p.Running() != 0 {
		t.Errorf("%d workers still counted", p.Running())
	}
}

// A worker that exits without answering while a child it started holds
// its output open is stopped as one that exited, at once: a child in its
// process group is killed, one that left the group is waited for a second
// at most, and the job is told the worker crashed, not made to wait for
// the step time-out and told it was late.
func TestExitedWorkerWithChildHoldingTheOutput(t *testing.T) {
	for _, c := range []struct {
		name, session, want string
	}{
		{"child in the group", "0", "the worker exited (exit status 3) before answering step 0; its last error output: worker: gone"},
		{"child in a session of its own", "1", "the worker exited (exit status 3) before answering step 0; a process it started still holds its output open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, al, pidfile := pool(t, "orphan.py", func(cfg *worker.Config) {
				cfg.StepTimeout = time.Hour
				cfg.Env = append(cfg.Env, "NEW_SESSION="+c.session)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := p.Complete(ctx, prompt("job-1", 0, ""))
			ps := pids(t, pidfile)
			if c.session == "1" && len(ps) == 2 {
				gone(t, ps[:1])
				if child, err := os.FindProcess(ps[1]); err == nil {
					child.Kill()
				}
			} else {
				gone(t, ps)
			}
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "(crash)") {
				t.Fatalf("err = %v; want agent.ErrWorkerFailed with %q (crash)", err, c.want)
			}
			if p.Running() != 0 {
				t.Errorf("%d workers still counted", p.Running())
			}
			if es := al.Entries(); len(es) != 1 || !strings.Contains(string(es[0].Detail), `"rule":"crash"`) {
				t.Fatalf("audit: %+v", es)
			}
		})
	}
}
