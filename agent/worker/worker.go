package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/schemas"
)

// Auditor records protocol violations (*audit.Log).
type Auditor interface {
	Append(ctx context.Context, e audit.Entry) (audit.Entry, error)
}

var _ Auditor = (*audit.Log)(nil)

// Config is what a Pool runs.
type Config struct {
	// Command is the program and its arguments (required).
	Command []string
	// Dir is the worker's working directory; it must not be in Sandbox
	// (default: the system's temporary directory).
	Dir string
	// Sandbox is the node's workspace, which Dir must stay out of: the
	// worker acts on it only through its proposals.
	Sandbox string
	// Env is the worker's whole environment beside PATH: NAME=value
	// entries. Nothing else of the node's environment is passed.
	Env []string
	// StepTimeout bounds the wait for one answer (0: only the caller's
	// context bounds it).
	StepTimeout time.Duration
	// MaxLineBytes bounds one line of the worker (default 1 MiB).
	MaxLineBytes int
	// MaxProcs bounds the worker processes running at once (default 4);
	// a job's first step waits for a free one.
	MaxProcs int
	// Audit, when set, records every protocol violation.
	Audit Auditor
	// Redact are the operator's patterns (agent.redact) removed, beside
	// the runtime's built-in ones (agent.Redact), from a violation's
	// reason, which carries the worker's error output, before it is
	// logged, audited or returned.
	Redact []*regexp.Regexp
	Logger *slog.Logger
}

// DefaultMaxLineBytes is the default bound of a worker's line.
const DefaultMaxLineBytes = 1 << 20

// MaxStaleLines bounds the lines for past steps a worker's process may
// write: each is skipped; one more is a protocol violation (rule stale).
// The steps the skipped lines named are told in the step's history
// (agent.Completion.LateLines), which keeps as many.
const MaxStaleLines = agent.MaxLateLines

// maxStderr is how much of a worker's error output is kept (its end).
const maxStderr = 2048

// Pool runs one worker process per job, at most MaxProcs at once. It is
// safe for concurrent use; the steps of one job come one at a time.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{}
	mu    sync.Mutex
	procs map[string]*proc
	env   []string
	stale atomic.Int64 // the lines for past steps skipped
}

var (
	_ agent.Model    = (*Pool)(nil)
	_ agent.JobEnder = (*Pool)(nil)
)

// envName is the rule of a variable's name in Config.Env.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns a Pool of cfg; it starts no process until a job asks.
func New(cfg Config) (*Pool, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, errors.New("worker: Config.Command is required")
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("worker: command_dir: %w", err)
	}
	if cfg.Sandbox != "" {
		sb, err := filepath.Abs(cfg.Sandbox)
		if err != nil {
			return nil, fmt.Errorf("worker: sandbox: %w", err)
		}
		if rel, err := filepath.Rel(sb, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("worker: command_dir %q: want a directory outside the sandbox %q (the worker acts on the workspace only through its proposals)", dir, sb)
		}
	}
	cfg.Dir = dir
	env := []string{"PATH=" + os.Getenv("PATH")}
	for i, e := range cfg.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || !envName.MatchString(name) {
			return nil, fmt.Errorf("worker: command_env[%d]: want NAME=value with NAME of letters, digits and _; got %q", i, name)
		}
		if name == "PATH" {
			env[0] = e
			continue
		}
		env = append(env, e)
	}
	defaults.Positive(&cfg.MaxLineBytes, DefaultMaxLineBytes)
	defaults.Positive(&cfg.MaxProcs, 4)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxProcs), procs: map[string]*proc{}, env: env}, nil
}

// Running returns how many worker processes run now.
func (p *Pool) Running() int { return len(p.slots) }

// StaleLines returns how many lines for past steps the pool's workers
// wrote, each skipped and never run, since the pool was made.
func (p *Pool) StaleLines() int64 { return p.stale.Load() }

// proc is one job's worker process.
type proc struct {
	job     string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan line     // the lines read, one at a time
	exited  chan struct{} // closed once the process was waited for
	done    chan struct{} // closed by stop: the reader ends
	out     *os.File      // the read end of the worker's output
	read    chan struct{} // closed once the reader ended
	waitErr error
	stderr  *tail
	// stepped is set once a line of the worker named its step: every
	// line after must name one. stale counts its lines for past steps.
	// Only the job's step (one at a time) reads and sets them.
	stepped bool
	stale   int
}

// line is a line read from the worker, or why reading stopped.
type line struct {
	b   []byte
	err error
}

// Complete implements agent.Model: it sends the job's next step to its
// worker (starting it, with the job request, on the job's first step or
// after a stop) and returns the worker's answer line.
func (p *Pool) Complete(ctx context.Context, pr agent.Prompt) (*agent.Completion, error) {
	if pr.Job == nil {
		return nil, errors.New("worker: the prompt carries no job request")
	}
	job := pr.Job.JobID
	p.mu.Lock()
	w := p.procs[job]
	p.mu.Unlock()
	var (
		out  [][]byte
		late []int // the past steps of the lines skipped
	)
	if w == nil {
		var err error
		if w, err = p.start(ctx, job); err != nil {
			return nil, err
		}
		req, err := RequestLine(pr)
		if err != nil {
			return nil, err
		}
		// The worker's first answer names the request's step, which the
		// request a delegate gets (RequestLine's) does not carry.
		out = append(out, withStep(req, pr.Step))
	} else {
		// A line written before the step's is a late one: skipped when
		// it names a past step, a violation otherwise.
	pending:
		for {
			select {
			case l := <-w.lines:
				if l.err != nil {
					return nil, p.broken(w, l.err, pr.Step)
				}
				if _, n, named, _ := AnswerStep(l.b); named && n < pr.Step {
					if err := p.skip(w, n, pr.Step, &late); err != nil {
						return nil, err
					}
					continue
				}
				return nil, p.violation(w, "flood", "the worker wrote a line it was not asked for (one line a step)")
			default:
				break pending
			}
		}
		out = append(out, ObservationLine(pr))
	}
	for _, b := range out {
		if err := CheckSent(b); err != nil {
			p.stop(w)
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	// The step's time runs from here, its writing included: a worker
	// that does not read its input (a line longer than the pipe holds)
	// is stopped like one that does not answer, and stopping it ends the
	// write.
	var timeout <-chan time.Time
	if p.cfg.StepTimeout > 0 {
		t := time.NewTimer(p.cfg.StepTimeout)
		defer t.Stop()
		timeout = t.C
	}
	sent := make(chan error, 1)
	go func() {
		for _, b := range out {
			if _, err := w.stdin.Write(append(b, '\n')); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// The answer may come before the writer says it is done (the worker
	// read the step and answered at once): it is taken once the write
	// is, which a worker that answers without reading never lets end.
	lines, exited := w.lines, w.exited
	var answer *line
	var grace <-chan time.Time
	for {
		if sent == nil && answer != nil {
			if answer.err != nil {
				return nil, p.broken(w, answer.err, pr.Step)
			}
			if _, err := ParseLine(answer.b, p.cfg.MaxLineBytes); err != nil {
				var le *LineError
				errors.As(err, &le)
				return nil, Refused(len(answer.b), p.violation(w, le.Rule, "the worker wrote garbage: "+le.Message))
			}
			return &agent.Completion{Text: string(answer.b), Model: "worker:" + filepath.Base(p.cfg.Command[0]), LateLines: late}, nil
		}
		select {
		case err := <-sent:
			if err != nil {
				return nil, p.broken(w, fmt.Errorf("%w: %w", errInputClosed, err), pr.Step)
			}
			sent = nil // written
		case l := <-lines:
			if l.err == nil {
				b, err := p.judge(w, l.b, pr.Step, &late)
				if err != nil {
					return nil, err
				}
				if b == nil {
					continue // a line for a past step: the answer is still to come
				}
				l.b = b
			}
			answer, lines = &l, nil
		case <-exited:
			// The worker is gone; what it wrote is in the pipe. A
			// process it left in its group (a shell's "cmd &") may hold
			// the pipe open, which would keep the step waiting for its
			// time-out: it is killed, so the output ends after what the
			// worker wrote. One that left the group is waited for
			// exitGrace at most.
			exited = nil
			killGroup(w.cmd)
			g := time.NewTimer(exitGrace)
			defer g.Stop()
			grace = g.C
		case <-grace:
			return nil, p.broken(w, errHeldOpen, pr.Step)
		case <-timeout:
			return nil, p.violation(w, "timeout", fmt.Sprintf("the worker did not answer step %d within its step time-out of %s", pr.Step, p.cfg.StepTimeout))
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), agent.ErrTimeLimit) {
				// The job's time ran out, not the worker's: it is
				// stopped without being blamed.
				pid := w.cmd.Process.Pid
				p.stop(w)
				return nil, TimeLimit(p.log, p.cfg.Audit, w.job, pr.Step, map[string]any{"command": p.cfg.Command[0], "pid": pid})
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, p.violation(w, "timeout", fmt.Sprintf("the worker did not answer step %d within the request time-out", pr.Step))
			}
			p.stop(w) // canceled, or the node stops: the job's next step starts afresh
			return nil, fmt.Errorf("worker: %w", ctx.Err())
		}
	}
}

// judge judges by its step a line the worker wrote during step: it
// returns the line to take as the step's answer (its step member off),
// nil for a line of a past step, which is skipped (its step added to
// late), or the violation of a
// line that names a step not asked yet, a malformed step, or no step when
// the worker's earlier lines named theirs (unless it is garbage, refused
// as such by the caller). A line that names no step from
// a worker that never named one is taken as it is: such a worker's late
// line cannot be told from its answer.
func (p *Pool) judge(w *proc, b []byte, step int, late *[]int) ([]byte, error) {
	rest, n, named, err := AnswerStep(b)
	if err != nil {
		var le *LineError
		errors.As(err, &le)
		return nil, Refused(len(b), p.violation(w, le.Rule, "the worker wrote garbage: "+le.Message))
	}
	switch {
	case !named && w.stepped:
		if _, err := ParseLine(b, p.cfg.MaxLineBytes); err != nil {
			return b, nil // garbage: refused as such, its rule named
		}
		return nil, Refused(len(b), p.violation(w, "step",
			fmt.Sprintf("the worker's answer names no step at /step after its earlier answers named theirs (want %d, the step of the line it answers)", step)))
	case !named:
		return b, nil
	}
	w.stepped = true
	switch {
	case n < step:
		return nil, p.skip(w, n, step, late)
	case n > step:
		return nil, Refused(len(b), p.violation(w, "step",
			fmt.Sprintf("the worker's answer names step %d at /step; want the step of the line it answers, %d", n, step)))
	}
	return rest, nil
}

// skip skips a line of w that names the past step n during step: logged,
// counted and added to late (the step's history tells it), never taken as
// an answer; past MaxStaleLines of the process, the worker is stopped
// (rule stale).
func (p *Pool) skip(w *proc, n, step int, late *[]int) error {
	w.stepped = true
	w.stale++
	if w.stale > MaxStaleLines {
		return p.violation(w, "stale", fmt.Sprintf("the worker wrote more than %d lines for past steps (the last names step %d at /step, during step %d)", MaxStaleLines, n, step))
	}
	p.stale.Add(1)
	*late = append(*late, n)
	p.log.Warn("worker: a line for a past step is skipped, not run", "job", w.job, "step", step, "line_step", n, "skipped", w.stale)
	return nil
}

// exitGrace is how long the output of a worker that exited is still read
// when a process it started outside its group holds the output open.
const exitGrace = time.Second

// errInputClosed wraps the error of a write to a worker: it closed its
// input (or exited).
var errInputClosed = errors.New("the worker's input is closed")

// errHeldOpen is why a step ended when the worker exited and its output
// stayed open past exitGrace.
var errHeldOpen = errors.New("the worker's output is held open by a process it started")

// maxRequestText bounds the task_description of a job request
// (schemas/job-request.v1.json), less room for the mark of a cut.
const maxRequestText = 256<<10 - 16

// cutText is s cut to at most max bytes, on a rune boundary, marked.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// latest is what the prompt tells since the last answer: its user
// messages after the last assistant message (the observation, and what
// the requester or an operator said meanwhile), or, on the first step,
// nothing.
func latest(msgs []agent.ChatMessage) string {
	from := len(msgs)
	for from > 2 && msgs[from-1].Role != agent.RoleAssistant {
		from--
	}
	parts := make([]string, 0, len(msgs)-from)
	for _, m := range msgs[from:] {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, "\n\n")
}

// RequestLine is the first line a worker gets for the job of pr: its job
// request (schemas/job-request.v1.json). When the job went on before (a
// follow-up, a restart), the task description also tells the latest
// observation, so that a worker that starts afresh knows where it stands.
func RequestLine(pr agent.Prompt) ([]byte, error) {
	if pr.Job == nil {
		return nil, errors.New("worker: the prompt carries no job request")
	}
	first := *pr.Job
	if n := len(pr.Messages); n > 2 {
		first.TaskDescription = cutText(first.TaskDescription+"\n\nThe job went on before this worker started; the latest observation:\n"+
			latest(pr.Messages), maxRequestText)
	}
	return json.Marshal(&first)
}

// withStep returns req, the JSON object RequestLine made, with a step
// member added after its others (in a new array: req is left as it is).
func withStep(req []byte, step int) []byte {
	sep := ","
	if string(req) == "{}" {
		sep = ""
	}
	return fmt.Appendf(req[:len(req)-1:len(req)-1], `%s"step":%d}`, sep, step)
}

// ObservationLine is the line that tells a worker the latest observation
// of the job of pr (schemas/worker-observation.v1.json).
func ObservationLine(pr agent.Prompt) []byte {
	var job string
	if pr.Job != nil {
		job = pr.Job.JobID
	}
	b, _ := json.Marshal(struct {
		JobID       string `json:"job_id"`
		Step        int    `json:"step"`
		Observation string `json:"observation"`
	}{job, pr.Step, latest(pr.Messages)})
	return b
}

// CheckSent validates a line the node writes for a worker (a job request
// or an observation) against its schema.
func CheckSent(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m, _ := v.(map[string]any)
	s := schemas.WorkerObservation()
	if _, ok := m["task_description"]; ok {
		s = schemas.JobRequest()
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("a line for the worker breaks its schema: %s", oneLine(err.Error(), 300))
	}
	return nil
}

// EndJob implements agent.JobEnder: the job's worker, if any, is told
// (its standard input closes) and stopped.
func (p *Pool) EndJob(job string) {
	p.mu.Lock()
	w := p.procs[job]
	p.mu.Unlock()
	if w != nil {
		p.stop(w)
	}
}

// Close stops every worker.
func (p *Pool) Close() {
	p.mu.Lock()
	ws := make([]*proc, 0, len(p.procs))
	for _, w := range p.procs {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		p.stop(w)
	}
}

// start starts the job's worker, once a process slot is free.
func (p *Pool) start(ctx context.Context, job string) (*proc, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("worker: waiting for a free worker slot: %w", ctx.Err())
	}
	cmd := exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = p.cfg.Dir, p.env
	setGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		<-p.slots
		return nil, fmt.Errorf("worker: %w", err)
	}
	// The output is read from a pipe of our own: Wait must not close it
	// before the last line is read.
	rd, wr, err := os.Pipe()
	if err != nil {
		<-p.slots
		return nil, fmt.Errorf("worker: %w", err)
	}
	cmd.Stdout = wr
	st := &tail{}
	cmd.Stderr = st
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		rd.Close()
		wr.Close()
		<-p.slots
		return nil, fmt.Errorf("%w: the worker %q could not start: %w", agent.ErrWorkerFailed, p.cfg.Command[0], err)
	}
	wr.Close()
	w := &proc{job: job, cmd: cmd, stdin: stdin, lines: make(chan line), exited: make(chan struct{}),
		done: make(chan struct{}), out: rd, read: make(chan struct{}), stderr: st}
	go func() {
		w.waitErr = cmd.Wait()
		close(w.exited)
	}()
	go p.read(w, rd)
	p.mu.Lock()
	p.procs[job] = w
	p.mu.Unlock()
	p.log.Info("worker: started", "job", job, "pid", cmd.Process.Pid)
	return w, nil
}

// read reads the worker's lines until its output closes, a line is over
// the bound, or the worker is stopped.
func (p *Pool) read(w *proc, rd *os.File) {
	defer close(w.read)
	defer rd.Close()
	br := bufio.NewReaderSize(rd, 64<<10)
	for {
		var buf []byte
		var err error
		for {
			chunk, e := br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > p.cfg.MaxLineBytes+1 {
				err = &LineError{Rule: "size", Message: fmt.Sprintf("a line of the worker is over %d bytes", p.cfg.MaxLineBytes)}
				break
			}
			if e == bufio.ErrBufferFull {
				continue
			}
			err = e
			break
		}
		l := line{b: bytes.TrimSuffix(buf, []byte("\n"))}
		if err != nil {
			l = line{err: err}
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				l = line{err: io.ErrUnexpectedEOF}
			}
		}
		select {
		case w.lines <- l:
		case <-w.done:
			return
		}
		if l.err != nil {
			return
		}
	}
}

// broken stops a worker whose stream ended or failed: it exited (or closed
// its output, or its input) before answering step, or its line was over
// the bound.
func (p *Pool) broken(w *proc, err error, step int) error {
	var le *LineError
	if errors.As(err, &le) {
		// The line read up to the bound is the answer it sent.
		return Refused(p.cfg.MaxLineBytes, p.violation(w, "flood", "the worker flooded its output: "+le.Message))
	}
	select {
	case <-w.exited:
	case <-time.After(time.Second):
	}
	how := "closed its output"
	if errors.Is(err, errInputClosed) {
		how = "closed its input"
	}
	select {
	case <-w.exited:
		how = "exited"
		if w.waitErr != nil {
			how = "exited (" + w.waitErr.Error() + ")"
		}
	default:
	}
	reason := fmt.Sprintf("the worker %s before answering step %d", how, step)
	if errors.Is(err, errHeldOpen) {
		reason += "; a process it started still holds its output open"
	}
	if s := w.stderr.String(); s != "" {
		// Redacted before it is cut: a key the cut splits would no
		// longer match its pattern.
		reason += "; its last error output: " + lastLine(p.redact(s), 500)
	}
	return p.violation(w, "crash", reason)
}

// violation stops w, audits the violation, and returns the error that
// makes the job wait for a human. The reason, which may carry what the
// worker wrote, is redacted first: the log and the audit log keep it.
func (p *Pool) violation(w *proc, rule, reason string) error {
	pid := w.cmd.Process.Pid
	p.stop(w)
	return Violation(p.log, p.cfg.Audit, w.job, rule, p.redact(reason), map[string]any{"command": p.cfg.Command[0], "pid": pid})
}

// redact removes the secrets of the runtime's patterns and the
// operator's from s.
func (p *Pool) redact(s string) string { return agent.Redact(s, nil, p.cfg.Redact) }

// Refused is the error of a step whose answer, of size bytes, was
// refused with err: an agent.AnsweredError, so that the runtime counts
// what the answer cost against the job's budget (its time, and its
// estimate when the node prices its steps), as it counts a model
// server's refused answer, and a source that only ever answers garbage
// costs the job what it sent. A worker reports no token usage.
func Refused(size int, err error) error {
	return &agent.AnsweredError{AnswerBytes: size, Err: err}
}

// Violation logs and audits (when a is not nil) a worker's protocol
// violation on job: rule is the broken rule, reason what happened, detail
// what names the worker (the rule is added). It returns the error, wrapping
// agent.ErrWorkerFailed, that makes the job wait for a human with the
// reason.
func Violation(log *slog.Logger, a Auditor, job, rule, reason string, detail map[string]any) error {
	log.Warn("worker: protocol violation; the worker is stopped", "job", job, "rule", rule, "reason", reason, "worker", detail)
	if a != nil {
		d := map[string]any{"rule": rule}
		for k, v := range detail {
			d[k] = v
		}
		b, _ := json.Marshal(d)
		// The audit log refuses control characters, which a worker's
		// error output (a terminal's colours, a NUL) or a delegate's
		// message may hold: they are replaced, so the violation is
		// recorded whatever the worker wrote.
		_, err := a.Append(context.Background(), audit.Entry{Actor: "host", Task: job, Step: audit.StepRejected,
			Decision: "worker_stopped", Reason: oneLine(noControls(reason), audit.MaxReasonLength-8), Detail: b})
		if err != nil {
			log.Error("worker: auditing a protocol violation", "job", job, "err", err)
		}
	}
	return fmt.Errorf("%w: %s (%s)", agent.ErrWorkerFailed, reason, rule)
}

// TimeLimit logs and audits (when a is not nil) that job's worker (or
// delegate), named by detail, was stopped in step because the job reached
// its time limit: no violation of the worker's, so the entry is not a
// rejection and its rule is time_limit. It returns the step's error, which
// wraps agent.ErrTimeLimit and context.DeadlineExceeded, not
// agent.ErrWorkerFailed.
func TimeLimit(log *slog.Logger, a Auditor, job string, step int, detail map[string]any) error {
	reason := fmt.Sprintf("the job reached its time limit during step %d; its worker was stopped there (not a protocol violation)", step)
	log.Info("worker: stopped at the job's time limit", "job", job, "step", step, "worker", detail)
	if a != nil {
		d := map[string]any{"rule": "time_limit"}
		for k, v := range detail {
			d[k] = v
		}
		b, _ := json.Marshal(d)
		_, err := a.Append(context.Background(), audit.Entry{Actor: "host", Task: job, Step: audit.StepFailed,
			Decision: "worker_stopped", Reason: reason, Detail: b})
		if err != nil {
			log.Error("worker: auditing a worker stopped at the job's time limit", "job", job, "err", err)
		}
	}
	return fmt.Errorf("worker: %s: %w (%w)", reason, agent.ErrTimeLimit, context.DeadlineExceeded)
}

// noControls is s as valid UTF-8 with each control character but white
// space replaced by U+FFFD.
func noControls(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 || r == 0x7f) && r != '\n' && r != '\t' && r != '\r' {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// stop ends w: its standard input closes, its process group is killed,
// the pool's end of its output is closed (a child that left the group may
// still hold the other end open: the reader must not wait for it), the
// process is waited for (no zombie) and its slot freed. It is idempotent.
func (p *Pool) stop(w *proc) {
	p.mu.Lock()
	if p.procs[w.job] != w {
		p.mu.Unlock()
		return
	}
	delete(p.procs, w.job)
	p.mu.Unlock()
	close(w.done)
	_ = w.stdin.Close()
	killGroup(w.cmd)
	_ = w.out.Close()
	<-w.read
	<-w.exited
	<-p.slots
}

// tail keeps the end of a stream, at most maxStderr bytes.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > maxStderr {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-maxStderr:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "")
}
