package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/snap"
)

// Peer is one simulated requester: its own identity, reaching the node
// through one transport.
type Peer struct {
	// Via names the transport in the report: "nostr", "http" or "ws".
	Via string
	// Agent carries the peer's requests (a client.Transport signing with
	// the peer's key).
	Agent client.Transport
}

// Memory is the memory a load tool's Go runtime is held near
// (memlimit.Hold): its collector runs when the tool holds this much, not
// each time its heap doubles, so that its own collections (a few
// milliseconds of a core each, every 200 ms at the default percentage
// with one peer) seldom fall inside the latencies it measures.
const Memory = 64 << 20

// Config is one load run.
type Config struct {
	// Peers make the requests, each one at a time, all at once.
	Peers []Peer
	// Mix draws each request's kind (DefaultMix when zero).
	Mix Mix
	// Duration is how long requests are started; those in flight at the
	// end are waited for and counted (Report.InFlight, Report.Drain).
	Duration time.Duration
	// Warmup, when above 0, runs the load for this long before Duration
	// starts: its requests are made and not counted, and the node's CPU
	// and memory are read from its end, so that connections, conversation
	// keys, caches and the node's first allocations stay out of the
	// figures.
	Warmup time.Duration
	// Rate, when above 0, makes the run an open loop: the peers start Rate
	// requests a second between them, each on a fixed schedule of its own
	// (one request every len(Peers)/Rate seconds, the peers' schedules
	// staggered), whatever the node's answers. A request's latency is
	// counted from the moment it was due, not from when its peer was free
	// to send it, so a node that falls behind shows it in the latencies
	// rather than only in a lower rate (the coordinated omission of a
	// closed loop). Requests due within Duration that their peer had not
	// started by its end are counted in Report.Behind. At 0 (a closed
	// loop) each peer sends its next request when the last is answered.
	Rate float64
	// Timeout bounds one request (default 10 s).
	Timeout time.Duration
	// Seeded, when set, names the task a tasks/get of peer asks for ("":
	// none, and the peer asks for one it made in this run). It is called
	// from the peer's goroutine with the peer's random source.
	Seeded func(peer int, r *rand.Rand) string
	// TextSize is the length of the text each message carries (default 500).
	TextSize int
	// Nodes, when set, read the CPU time and memory of the node's
	// processes (one each, several when replicas serve one identity); each
	// is read before and after the run.
	Nodes []func() (ProcStat, error)
	// Answered, when set, is told the id of each task a message/send or
	// message/stream was answered with, from the peers' goroutines at once:
	// it must be safe for concurrent use. It is how a run's tasks are
	// compared with the node's store afterwards.
	Answered func(taskID string)
	// Now is the clock (time.Now when nil): what latencies and the run's
	// length are measured with.
	Now func() time.Time
	// Seed makes the draws repeatable.
	Seed uint64
}

// keepTasks is how many of the tasks it made a peer remembers for its
// tasks/get requests.
const keepTasks = 64

// maxErrorKinds bounds the distinct error kinds counted; more are counted
// under "other".
const maxErrorKinds = 64

// Run drives the node with cfg until cfg.Duration has passed or ctx ends,
// and reports what the peers saw. It fails only when the run could not be
// made (no peers, the node's stats unreadable at the start).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.Peers) == 0 {
		return nil, errors.New("loadgen: no peers")
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("loadgen: duration %v: want more than 0", cfg.Duration)
	}
	if cfg.Warmup < 0 {
		return nil, fmt.Errorf("loadgen: warm-up %v: want 0 or more", cfg.Warmup)
	}
	if !(cfg.Rate >= 0) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("loadgen: rate %g: want 0 (a closed loop) or a finite number of requests a second", cfg.Rate)
	}
	if cfg.Mix.total() == 0 {
		cfg.Mix = DefaultMix()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.TextSize <= 0 {
		cfg.TextSize = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	before := make([]ProcStat, len(cfg.Nodes))
	for i, read := range cfg.Nodes {
		var err error
		if before[i], err = read(); err != nil {
			return nil, err
		}
	}
	text := strings.Repeat("load test ", cfg.TextSize/10+1)[:cfg.TextSize]
	start := cfg.Now().Add(cfg.Warmup) // of the measured part
	results := make([]*peerResult, len(cfg.Peers))
	var wg sync.WaitGroup
	for i := range cfg.Peers {
		p := &peerRun{cfg: &cfg, i: i, text: text, start: start,
			rnd: rand.New(rand.NewPCG(cfg.Seed, uint64(i))), res: newPeerResult(uint64(i))}
		results[i] = p.res
		wg.Go(func() { p.run(ctx) })
	}
	var errs []error
	if cfg.Warmup > 0 && len(cfg.Nodes) > 0 && sleepUntil(ctx, cfg.Now, start) {
		// The node's figures from the end of the warm-up.
		for i, read := range cfg.Nodes {
			var err error
			if before[i], err = read(); err != nil {
				errs = append(errs, fmt.Errorf("process %d at the end of the warm-up: %w", i+1, err))
			}
		}
	}
	wg.Wait()
	elapsed := max(cfg.Now().Sub(start), 0)
	r := newReport(cfg, results, elapsed)
	// The node's CPU is read over all of it, the requests in flight at the
	// end waited for.
	measured := elapsed
	for i, read := range cfg.Nodes {
		if len(errs) > 0 {
			break
		}
		after, err := read()
		if err != nil {
			errs = append(errs, fmt.Errorf("process %d: %w", i+1, err))
			continue
		}
		p := r.nodeStats(after.CPU-before[i].CPU, measured, after.RSS, after.PeakRSS)
		// VmHWM is the highest since the process started: the run's own
		// only when it rose during the run.
		p.PeakBeforeRun = after.PeakRSS <= before[i].PeakRSS
		r.Processes = append(r.Processes, p)
	}
	switch {
	case len(errs) > 0:
		r.Processes = nil
		r.NodeError = errors.Join(errs...).Error()
	case len(r.Processes) > 0:
		var sum NodeStats
		for _, p := range r.Processes {
			sum.CPU += p.CPU
			sum.RSS += p.RSS
			sum.PeakRSS += p.PeakRSS
			sum.PeakBeforeRun = sum.PeakBeforeRun || p.PeakBeforeRun
		}
		node := r.nodeStats(sum.CPU, measured, sum.RSS, sum.PeakRSS)
		node.PeakBeforeRun = sum.PeakBeforeRun
		r.Node = &node
		if len(r.Processes) == 1 {
			r.Processes = nil
		}
	}
	return r, nil
}

// nodeStats is the use of the machine of a process (or of several, their
// sums) that spent cpu in the wall time measured.
func (r *Report) nodeStats(cpu, measured time.Duration, rss, peak int64) NodeStats {
	s := NodeStats{CPU: cpu, RSS: rss, PeakRSS: peak}
	if r.Requests > 0 {
		s.CPUPerRequest = cpu / time.Duration(r.Requests)
	}
	if measured > 0 {
		s.Cores = cpu.Seconds() / measured.Seconds()
	}
	return s
}

// peerResult is what one peer saw; only its goroutine writes it.
type peerResult struct {
	lat    map[series]*latencies
	errs   map[string]int64
	events int64
	late   int64 // requests answered after the duration
	behind int64 // requests due in the duration, not started by its end
	seed   uint64
}

// series is the requests of one kind over one transport.
type series struct {
	via string
	op  Op
}

func newPeerResult(seed uint64) *peerResult {
	return &peerResult{lat: map[series]*latencies{}, errs: map[string]int64{}, seed: seed}
}

func (r *peerResult) record(s series, d time.Duration, err error) {
	l := r.lat[s]
	if l == nil {
		l = newLatencies(maxSamples, r.seed)
		r.lat[s] = l
	}
	l.add(d)
	if err != nil {
		kind := ErrorKind(err)
		if _, ok := r.errs[kind]; !ok && len(r.errs) >= maxErrorKinds {
			kind = "other"
		}
		r.errs[kind]++
	}
}

// peerRun is one peer's loop.
type peerRun struct {
	cfg   *Config
	i     int
	text  string
	start time.Time
	rnd   *rand.Rand
	res   *peerResult
	tasks []string // the newest tasks it made, at most keepTasks
	next  int      // where the next one goes once tasks is full
}

// run makes the peer's requests until the run's end: one after another
// (a closed loop), or each at its due time (Config.Rate).
func (p *peerRun) run(ctx context.Context) {
	end := p.start.Add(p.cfg.Duration)
	var interval time.Duration
	var due time.Time
	if p.cfg.Rate > 0 {
		n := len(p.cfg.Peers)
		// A rate so low that the interval passes the whole run (or a
		// Duration) makes one request a peer: converting a float64 beyond
		// int64 to a Duration is not defined.
		interval = p.cfg.Warmup + p.cfg.Duration
		if ns := float64(n) / p.cfg.Rate * float64(time.Second); ns < float64(interval) {
			interval = max(time.Duration(ns), 1)
		}
		// The peers' schedules staggered over one interval, from the
		// warm-up's start.
		due = p.start.Add(-p.cfg.Warmup + interval*time.Duration(p.i)/time.Duration(n))
	}
	for ctx.Err() == nil {
		now := p.cfg.Now()
		if interval > 0 {
			if !due.Before(end) {
				sleepUntil(ctx, p.cfg.Now, end) // the schedule runs to the end
				return
			}
			if !now.Before(end) {
				// Due within the run, and the peer is still busy with
				// earlier ones when it ends: the dues from the first
				// after the warm-up on.
				if lag := p.start.Sub(due); lag > 0 {
					due = due.Add((lag + interval - 1) / interval * interval)
				}
				if due.Before(end) {
					p.res.behind += int64((end.Sub(due) + interval - 1) / interval)
				}
				return
			}
			if !sleepUntil(ctx, p.cfg.Now, due) {
				return
			}
		} else if !now.Before(end) {
			return
		}
		if !p.request(ctx, due, end) {
			return
		}
		due = due.Add(interval)
	}
}

// request makes one request and records it unless it belongs to the
// warm-up; due is when it was due in an open loop (the zero time in a
// closed one). It returns false when the run was stopped meanwhile.
func (p *peerRun) request(ctx context.Context, due, end time.Time) bool {
	peer := p.cfg.Peers[p.i]
	op := p.cfg.Mix.pick(p.rnd.IntN(p.cfg.Mix.total()))
	payload := p.payload(op)
	if payload == nil { // a tasks/get with no task to ask for yet
		op, payload = OpSend, p.payload(OpSend)
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	t0 := p.cfg.Now()
	if !due.IsZero() {
		t0 = due
	}
	var resp *snap.Message
	var err error
	counted := !t0.Before(p.start)
	if op == OpStream {
		resp, err = peer.Agent.Stream(rctx, op.Method(), payload, func(*snap.Message) error {
			if counted {
				p.res.events++
			}
			return nil
		})
	} else {
		resp, err = peer.Agent.Send(rctx, op.Method(), payload)
	}
	t1 := p.cfg.Now()
	if ctx.Err() != nil && err != nil {
		return false // the run was stopped: not the node's error
	}
	if err == nil {
		if e := snap.ResponseError(resp.Payload); e != nil {
			err = e
		} else if op != OpGet {
			if id := p.remember(resp.Payload); id != "" && p.cfg.Answered != nil {
				p.cfg.Answered(id)
			}
		}
	}
	if !counted {
		return true
	}
	p.res.record(series{peer.Via, op}, t1.Sub(t0), err)
	if t1.After(end) {
		p.res.late++
	}
	return true
}

// sleepUntil waits until now() reaches t and reports whether it did
// before ctx ended.
func sleepUntil(ctx context.Context, now func() time.Time, t time.Time) bool {
	if d := t.Sub(now()); d > 0 {
		return periodic.Sleep(ctx, d) == nil
	}
	return ctx.Err() == nil
}

// payload is the request of op, or nil for a tasks/get with no task.
func (p *peerRun) payload(op Op) []byte {
	var v any
	switch op {
	case OpGet:
		id := ""
		if p.cfg.Seeded != nil {
			id = p.cfg.Seeded(p.i, p.rnd)
		}
		if id == "" && len(p.tasks) > 0 {
			id = p.tasks[p.rnd.IntN(len(p.tasks))]
		}
		if id == "" {
			return nil
		}
		v = map[string]any{"taskId": id, "historyLength": 10}
	default:
		v = map[string]any{"message": map[string]any{"messageId": snap.NewID(), "role": "user",
			"parts": []any{map[string]any{"text": p.text}}}}
	}
	b, _ := json.Marshal(v) // maps of strings and numbers always marshal
	return b
}

// remember keeps the id of the task a response carries ({"task": {"id"…}})
// and returns it ("" when there is none).
func (p *peerRun) remember(payload []byte) string {
	var r struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if json.Unmarshal(payload, &r) != nil || r.Task.ID == "" {
		return ""
	}
	if len(p.tasks) < keepTasks {
		p.tasks = append(p.tasks, r.Task.ID)
	} else {
		p.tasks[p.next] = r.Task.ID
		p.next = (p.next + 1) % keepTasks
	}
	return r.Task.ID
}

// ErrorKind names the kind of a failed request in the report: "snap
// CODE" for a SNAP error response, "http STATUS" for an HTTP refusal,
// "timeout" when no valid answer came in time, "no answer" for an
// exchange that ended without one, "invalid response" for an answer that
// failed the client's checks, "transport" otherwise.
func ErrorKind(err error) string {
	var se *snap.Error
	var he *client.StatusError
	switch {
	case errors.As(err, &he) && he.Err != nil:
		return fmt.Sprintf("snap %d (http %d)", int(he.Err.Code), he.StatusCode)
	case errors.As(err, &he):
		return fmt.Sprintf("http %d", he.StatusCode)
	case errors.Is(err, client.ErrInvalidResponse):
		return "invalid response"
	case errors.As(err, &se):
		return fmt.Sprintf("snap %d", int(se.Code))
	case errors.Is(err, client.ErrTimeout), errors.Is(err, client.ErrIdleTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, client.ErrNoAnswer):
		return "no answer"
	}
	return "transport"
}
