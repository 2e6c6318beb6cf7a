package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// fakeAgent is one peer's node in a unit test: each request takes a fixed
// time (on synctest's clock); a tasks/get of a task this peer was not given is
// refused with 1004 (as the node refuses another's task); fail, when set,
// makes a request fail.
type fakeAgent struct {
	took map[string]time.Duration
	mu   sync.Mutex
	made map[string]bool
	n    int
	fail func(n int) (payload []byte, err error)
}

func (a *fakeAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	time.Sleep(a.took[method]) // synctest's clock: no real wait
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	if a.fail != nil {
		if p, err := a.fail(a.n); p != nil || err != nil {
			return &snap.Message{Type: snap.TypeResponse, Payload: p}, err
		}
	}
	if method == "tasks/get" {
		var req struct {
			TaskID string `json:"taskId"`
		}
		json.Unmarshal(payload, &req)
		if !a.made[req.TaskID] {
			return &snap.Message{Type: snap.TypeResponse, Payload: errorPayload(1004)}, nil
		}
		return &snap.Message{Type: snap.TypeResponse, Payload: []byte(`{"task":{"id":"` + req.TaskID + `"}}`)}, nil
	}
	id := fmt.Sprintf("task-%d", a.n)
	a.made[id] = true
	return &snap.Message{Type: snap.TypeResponse, Payload: []byte(`{"task":{"id":"` + id + `"}}`)}, nil
}

func (a *fakeAgent) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	for range 2 {
		onEvent(&snap.Message{Type: snap.TypeEvent})
	}
	return a.Send(ctx, method, payload)
}

func errorPayload(code snap.Code) []byte {
	b, _ := json.Marshal(map[string]any{"error": &snap.Error{Code: code, Message: "refused"}})
	return b
}

func newFake() *fakeAgent {
	return &fakeAgent{made: map[string]bool{}, took: map[string]time.Duration{
		"message/send": 4 * time.Millisecond, "tasks/get": time.Millisecond, "message/stream": 10 * time.Millisecond}}
}

func TestRunReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agents := []*fakeAgent{newFake(), newFake(), newFake()}
		cpu := []time.Duration{time.Second, 3 * time.Second}
		calls := 0
		cfg := Config{
			Peers:    []Peer{{Via: ViaNostr, Agent: agents[0]}, {Via: ViaHTTP, Agent: agents[1]}, {Via: ViaHTTP, Agent: agents[2]}},
			Mix:      Mix{OpSend: 50, OpGet: 40, OpStream: 10},
			Duration: 2 * time.Second,
			Nodes: []func() (ProcStat, error){func() (ProcStat, error) {
				calls++
				return ProcStat{CPU: cpu[min(calls, 2)-1], RSS: 10 << 20, PeakRSS: 12 << 20}, nil
			}},
			Seed: 7,
		}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Errors != 0 || len(r.ErrorsByKind) != 0 {
			t.Fatalf("errors %d %v: a tasks/get asked for a task its peer did not make", r.Errors, r.ErrorsByKind)
		}
		var perOp [numOps]int64
		var perVia = map[string]int64{}
		for _, s := range r.Series {
			for op := range numOps {
				if s.Op == op.String() {
					perOp[op] += s.Requests
				}
			}
			perVia[s.Via] += s.Requests
			if want := agents[0].took[Op(0).Method()]; s.Op == "send" && s.Latency.P50 != want {
				t.Errorf("%s send p50 %v, want %v (the fake's time per send)", s.Via, s.Latency.P50, want)
			}
		}
		if perOp[OpSend]+perOp[OpGet]+perOp[OpStream] != r.Requests || perVia[ViaNostr]+perVia[ViaHTTP] != r.Requests {
			t.Fatalf("series %+v do not add up to %d requests", r.Series, r.Requests)
		}
		var made int
		for _, a := range agents {
			made += a.n
		}
		if int64(made) != r.Requests {
			t.Errorf("report counts %d requests, the agents answered %d", r.Requests, made)
		}
		// Every kind was drawn, roughly by its weight.
		for op, w := range cfg.Mix {
			share := float64(perOp[op]) / float64(r.Requests)
			if want := float64(w) / 100; share < want-0.1 || share > want+0.1 {
				t.Errorf("%s: %.2f of the requests, want about %.2f", Op(op), share, want)
			}
		}
		if r.StreamEvents != 2*perOp[OpStream] {
			t.Errorf("stream events %d, want 2 per stream (%d)", r.StreamEvents, perOp[OpStream])
		}
		if r.Duration != cfg.Duration || r.Drain > 10*time.Millisecond || r.InFlight > 3 {
			t.Errorf("duration %v, %d in flight waited for %v; want %v, at most a request a peer",
				r.Duration, r.InFlight, r.Drain, cfg.Duration)
		}
		if want := float64(r.Requests-r.InFlight) / r.Duration.Seconds(); r.Throughput != want {
			t.Errorf("throughput %v, want %v", r.Throughput, want)
		}
		if l := r.Latency; l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.Max != 10*time.Millisecond {
			t.Errorf("latency %+v: want ordered percentiles, max 10ms (a stream)", l)
		}
		if r.Node == nil || r.Node.CPU != 2*time.Second || r.Node.RSS != 10<<20 || r.Node.PeakRSS != 12<<20 ||
			r.Node.CPUPerRequest != 2*time.Second/time.Duration(r.Requests) {
			t.Errorf("node %+v: want 2s of CPU over the run, RSS 10 MiB, peak 12 MiB", r.Node)
		}
	})
}

// TestRunErrorsByKind checks that failures are counted by their kind, and
// that a response carrying a SNAP error is a failure.
func TestRunErrorsByKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake()
		a.fail = func(n int) ([]byte, error) {
			switch n % 4 {
			case 1:
				return errorPayload(snap.CodeServiceUnavailable), nil
			case 2:
				return nil, fmt.Errorf("waiting: %w", client.ErrTimeout)
			case 3:
				return nil, &client.StatusError{StatusCode: 429, Err: &snap.Error{Code: snap.CodeRateLimitExceeded}}
			}
			return nil, nil
		}
		r, err := Run(context.Background(), Config{Peers: []Peer{{Via: ViaHTTP, Agent: a}}, Mix: Mix{OpSend: 1},
			Duration: 400 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if r.Requests != 100 {
			t.Fatalf("%d requests, want 100 of 4 ms in 400 ms", r.Requests)
		}
		want := map[string]int64{"snap 5003": 25, "timeout": 25, "snap 5002 (http 429)": 25}
		if fmt.Sprint(r.ErrorsByKind) != fmt.Sprint(want) || r.Errors != 75 {
			t.Errorf("errors %d %v, want 75 %v", r.Errors, r.ErrorsByKind, want)
		}
	})
}

func TestErrorKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&snap.Error{Code: 1004}, "snap 1004"},
		{fmt.Errorf("x: %w", &client.StatusError{StatusCode: 503}), "http 503"},
		{fmt.Errorf("%w: %w", client.ErrInvalidResponse, &snap.Error{Code: 2001}), "invalid response"},
		{context.DeadlineExceeded, "timeout"},
		{client.ErrIdleTimeout, "timeout"},
		{client.ErrNoAnswer, "no answer"},
		{fmt.Errorf("dial tcp: connection refused"), "transport"},
	} {
		if got := ErrorKind(c.err); got != c.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestRunStops checks that a run ends when its context does, long before
// its duration.
func TestRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		a := newFake()
		a.fail = func(n int) ([]byte, error) {
			if n == 50 {
				cancel()
			}
			return nil, nil
		}
		r, err := Run(ctx, Config{Peers: []Peer{{Via: ViaHTTP, Agent: a}}, Mix: Mix{OpSend: 1}, Duration: time.Hour})
		if err != nil || r.Requests != 50 {
			t.Fatalf("Run = %d requests, %v; want it to stop after the 50th", r.Requests, err)
		}
	})
}

func TestSeededTasks(t *testing.T) {
	const total, owners = 103, 10
	pick := SeededTasks(total, owners)
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for peer := range owners {
		for range 200 {
			id := pick(peer, r)
			var j int
			if _, err := fmt.Sscanf(id, "seed-%d", &j); err != nil || j >= total || j%owners != peer {
				t.Fatalf("peer %d asked for %q: not one of its seeded tasks", peer, id)
			}
			seen[id] = true
		}
	}
	if len(seen) != total {
		t.Errorf("%d of the %d tasks asked for", len(seen), total)
	}
}

func TestRunRefusesNoPeers(t *testing.T) {
	if _, err := Run(context.Background(), Config{Duration: time.Second}); err == nil {
		t.Error("no peers: no error")
	}
	if _, err := Run(context.Background(), Config{Peers: []Peer{{}}}); err == nil {
		t.Error("no duration: no error")
	}
}

// TestRunProcesses checks the figures of a node of several processes
// (replicas): each process's CPU over the run and memory, and their sums;
// and that a process that cannot be read at the end is named in
// NodeError rather than giving a partial sum.
func TestRunProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proc := func(cpu0, cpu1 time.Duration, rss int64, failAfter bool) func() (ProcStat, error) {
			calls := 0
			return func() (ProcStat, error) {
				calls++
				if calls > 1 && failAfter {
					return ProcStat{}, fmt.Errorf("no such process")
				}
				return ProcStat{CPU: []time.Duration{cpu0, cpu1}[min(calls, 2)-1], RSS: rss, PeakRSS: 2 * rss}, nil
			}
		}
		cfg := Config{Peers: []Peer{{Via: ViaHTTP, Agent: newFake()}}, Mix: Mix{OpSend: 1}, Duration: time.Second,
			Nodes: []func() (ProcStat, error){proc(time.Second, 2*time.Second, 10<<20, false), proc(0, 3*time.Second, 20<<20, false)}}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Processes) != 2 || r.Processes[0].CPU != time.Second || r.Processes[1].CPU != 3*time.Second ||
			r.Processes[0].RSS != 10<<20 || r.Processes[1].PeakRSS != 40<<20 {
			t.Fatalf("processes %+v: want 1 s and 3 s of CPU, RSS 10 and 20 MiB", r.Processes)
		}
		if r.Node == nil || r.Node.CPU != 4*time.Second || r.Node.RSS != 30<<20 || r.Node.PeakRSS != 60<<20 ||
			r.Node.CPUPerRequest != 4*time.Second/time.Duration(r.Requests) || r.Node.Cores != 4/r.Duration.Seconds() {
			t.Errorf("node %+v: want the processes' sums", r.Node)
		}
		if want := 3 * time.Second / time.Duration(r.Requests); r.Processes[1].CPUPerRequest != want {
			t.Errorf("process 2: %v per request, want %v", r.Processes[1].CPUPerRequest, want)
		}

		cfg.Nodes[1] = proc(0, 0, 1, true)
		r, err = Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Node != nil || r.Processes != nil || !strings.Contains(r.NodeError, "process 2: no such process") {
			t.Errorf("node %+v, processes %v, error %q: want no figures and process 2 named", r.Node, r.Processes, r.NodeError)
		}
	})
}

// TestRunAnswered checks that every task a send or stream was answered
// with is told to Config.Answered, once, and nothing else.
func TestRunAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agents := []*fakeAgent{newFake(), newFake()}
		var mu sync.Mutex
		got := map[string]int{}
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: agents[0]}, {Via: ViaNostr, Agent: agents[1]}},
			Mix:   Mix{OpSend: 50, OpGet: 40, OpStream: 10}, Duration: time.Second,
			Answered: func(id string) {
				mu.Lock()
				got[id]++
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var made int64
		for _, s := range r.Series {
			if s.Op != "get" {
				made += s.Requests
			}
		}
		// The two fakes number their tasks alike: each id is told once per
		// peer that made it.
		total := 0
		for id, n := range got {
			if n > 2 || !strings.HasPrefix(id, "task-") {
				t.Errorf("task %q told %d times", id, n)
			}
			total += n
		}
		if made == 0 || int64(total) != made {
			t.Errorf("%d tasks told, %d sends and streams answered", total, made)
		}
	})
}

// TestRunPeakBeforeTheRun checks that a node's peak RSS (VmHWM, its
// highest since it started) that did not rise during the run is reported
// as reached before it, not as the run's; one that rose is the run's.
func TestRunPeakBeforeTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proc := func(peak0, peak1 int64) func() (ProcStat, error) {
			calls := 0
			return func() (ProcStat, error) {
				calls++
				return ProcStat{RSS: 20 << 20, PeakRSS: []int64{peak0, peak1}[min(calls, 2)-1]}, nil
			}
		}
		cfg := Config{Peers: []Peer{{Via: ViaHTTP, Agent: newFake()}}, Mix: Mix{OpSend: 1}, Duration: time.Second,
			Nodes: []func() (ProcStat, error){proc(100<<20, 100<<20)}}
		r, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Node == nil || r.Node.PeakRSS != 100<<20 || !r.Node.PeakBeforeRun {
			t.Fatalf("node %+v: want the peak of 100 MiB marked as reached before the run", r.Node)
		}
		var buf strings.Builder
		if err := r.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "peak 100.0 MiB before the run") {
			t.Errorf("report:\n%s\nwant the peak said to be before the run", buf.String())
		}

		// Two processes: one whose peak rose, one whose did not.
		cfg.Nodes = []func() (ProcStat, error){proc(30<<20, 40<<20), proc(100<<20, 100<<20)}
		if r, err = Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if len(r.Processes) != 2 || r.Processes[0].PeakBeforeRun || !r.Processes[1].PeakBeforeRun || !r.Node.PeakBeforeRun {
			t.Errorf("processes %+v, node %+v: want the second's peak, and so the sum's, before the run", r.Processes, r.Node)
		}
		cfg.Nodes = []func() (ProcStat, error){proc(30<<20, 40<<20)}
		if r, err = Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if r.Node.PeakRSS != 40<<20 || r.Node.PeakBeforeRun {
			t.Errorf("node %+v: want the peak of 40 MiB reached in the run", r.Node)
		}
	})
}

// stallAgent is a fakeAgent whose first request started after stallAfter
// (on synctest's clock) takes stall more.
type stallAgent struct {
	*fakeAgent
	t0                time.Time
	stallAfter, stall time.Duration
	stalled           bool
}

func (a *stallAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	if !a.stalled && time.Since(a.t0) >= a.stallAfter {
		a.stalled = true
		time.Sleep(a.stall)
	}
	return a.fakeAgent.Send(ctx, method, payload)
}

// TestRunThroughputOverTheDuration checks that the requests in flight when
// the duration ends are waited for and counted, their latencies with the
// others', but that the throughput is of the requests answered within the
// duration, over the duration: one request that hangs 5 s at the end of a
// 1 s run does not divide the run's 499 requests by 6 s.
func TestRunThroughputOverTheDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &stallAgent{fakeAgent: newFake(), t0: time.Now(), stallAfter: 990 * time.Millisecond, stall: 5 * time.Second}
		calls := 0
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: newFake()}, {Via: ViaHTTP, Agent: slow}},
			Mix:   Mix{OpSend: 1}, Duration: time.Second, Timeout: time.Minute,
			Nodes: []func() (ProcStat, error){func() (ProcStat, error) {
				calls++
				return ProcStat{CPU: time.Duration(calls-1) * 4990 * time.Millisecond}, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Sends of 4 ms each: 250 from the first peer, 249 from the slow
		// one, whose last started at 992 ms and ended at 5.996 s.
		if r.Requests != 499 || r.Latency.Max != 5*time.Second+4*time.Millisecond {
			t.Errorf("%d requests, max %v; want 499, the last one's 5.004s", r.Requests, r.Latency.Max)
		}
		if r.Duration != time.Second || r.InFlight != 1 || r.Drain != 4996*time.Millisecond {
			t.Errorf("duration %v, %d in flight at its end, waited for %v; want 1s, 1, 4.996s", r.Duration, r.InFlight, r.Drain)
		}
		if r.Throughput != 498 {
			t.Errorf("throughput %v/s, want 498/s (answered within the second)", r.Throughput)
		}
		if r.Node == nil || r.Node.CPUPerRequest != 10*time.Millisecond || r.Node.Cores != 4.99/5.996 {
			t.Errorf("node %+v: want 4.99 s of CPU over the 499 requests and the 5.996 s it was read over", r.Node)
		}
	})
}

// TestRunWarmup checks that the warm-up's requests are made and not
// counted, and that the node's CPU is read from the warm-up's end.
func TestRunWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake()
		calls := 0
		cpu := []time.Duration{time.Second, 5 * time.Second, 6 * time.Second}
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: a}}, Mix: Mix{OpSend: 1},
			Warmup: time.Second, Duration: time.Second,
			Nodes: []func() (ProcStat, error){func() (ProcStat, error) {
				calls++
				return ProcStat{CPU: cpu[min(calls, 3)-1]}, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Sends of 4 ms: 250 in the warm-up, 250 counted.
		if a.n != 500 || r.Requests != 250 || r.Duration != time.Second || r.Warmup != time.Second {
			t.Errorf("%d requests made, %d counted over %v after %v; want 500, 250 over 1s after 1s", a.n, r.Requests, r.Duration, r.Warmup)
		}
		if calls != 3 || r.Node == nil || r.Node.CPU != time.Second {
			t.Errorf("node read %d times, %+v; want 3 reads (start, warm-up's end, end) and 1 s of CPU after the warm-up", calls, r.Node)
		}
	})
}

// TestRunOpenLoop checks an open loop's schedule: 2 peers at 100
// requests a second between them make 100 requests in a second, each
// answered in its 4 ms, none behind.
func TestRunOpenLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newFake(), newFake()
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: a}, {Via: ViaHTTP, Agent: b}}, Mix: Mix{OpSend: 1},
			Duration: time.Second, Rate: 100,
		})
		if err != nil {
			t.Fatal(err)
		}
		if a.n != 50 || b.n != 50 || r.Requests != 100 || r.Behind != 0 || r.Rate != 100 {
			t.Errorf("peers made %d and %d requests, %d counted, %d behind; want 50 each, 100, 0", a.n, b.n, r.Requests, r.Behind)
		}
		if r.Latency.Max != 4*time.Millisecond || r.Throughput != 100 {
			t.Errorf("latency %+v, %v/s; want 4 ms each, 100/s", r.Latency, r.Throughput)
		}
	})
}

// TestRunOpenLoopCountsFromDue checks what an open loop is for: a node
// that stalls for half a second shows it in every request due during the
// stall (their latency counted from when each was due), where a closed
// loop would show one slow request; and requests due before the end but
// not started by then are counted as behind.
func TestRunOpenLoopCountsFromDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One request every 10 ms; the one due at 100 ms takes 504 ms.
		slow := &stallAgent{fakeAgent: newFake(), t0: time.Now(), stallAfter: 100 * time.Millisecond, stall: 500 * time.Millisecond}
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: slow}}, Mix: Mix{OpSend: 1},
			Duration: time.Second, Rate: 100, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		// Due at 110 ms and sent at 604 ms: 498 ms, and so on down, the
		// backlog cleared 4 ms at a time at 6 ms a due.
		if r.Latency.Max != 504*time.Millisecond || r.Latency.P50 < 100*time.Millisecond {
			t.Errorf("latency %+v: want the stall in the requests due during it (max 504 ms, p50 over 100 ms)", r.Latency)
		}
		if r.Requests+r.Behind != 100 || r.Behind != 0 {
			// 100 due; the backlog (49 requests) clears in 49 × 4 ms.
			t.Errorf("%d requests, %d behind; want all 100 made", r.Requests, r.Behind)
		}

		stuck := &stallAgent{fakeAgent: newFake(), t0: time.Now(), stallAfter: 900 * time.Millisecond, stall: 500 * time.Millisecond}
		r, err = Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: stuck}}, Mix: Mix{OpSend: 1},
			Duration: time.Second, Rate: 100, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		// The request due at 900 ms ends at 1.404 s: the 9 due from 910 to
		// 990 ms were never sent.
		if r.Requests != 91 || r.Behind != 9 || r.InFlight != 1 {
			t.Errorf("%d requests, %d behind, %d in flight at the end; want 91, 9, 1", r.Requests, r.Behind, r.InFlight)
		}
		var out strings.Builder
		r.WriteText(&out)
		if !strings.Contains(out.String(), "9 requests due in the run were not started by its end") {
			t.Errorf("report does not say the node fell behind:\n%s", &out)
		}
	})
}

func TestRunRefusesBadRateOrWarmup(t *testing.T) {
	for _, cfg := range []Config{{Rate: -1}, {Warmup: -time.Second}} {
		cfg.Peers, cfg.Duration = []Peer{{Via: ViaHTTP, Agent: newFake()}}, time.Second
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(rate %v, warm-up %v) = nil error", cfg.Rate, cfg.Warmup)
		}
	}
}

// A rate so low that a peer's interval overflows a Duration offers as
// good as nothing: one request a peer at most, not a peer sending as fast
// as it is answered (a float64 too large for an int64 converts to the
// smallest int64 on amd64, which max(…, 1) made 1 ns). The same for a
// warm-up before it.
func TestRunOpenLoopTinyRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newFake(), newFake()
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: a}, {Via: ViaHTTP, Agent: b}}, Mix: Mix{OpSend: 1},
			Duration: time.Second, Warmup: time.Second, Rate: 1e-12,
		})
		if err != nil {
			t.Fatal(err)
		}
		if a.n+b.n > 2 || r.Behind != 0 {
			t.Errorf("peers made %d and %d requests, %d behind; want at most 1 each, none behind", a.n, b.n, r.Behind)
		}
	})
}

// Behind counts the requests due within Duration only: a peer still
// stuck on a request of the warm-up when the run ends was behind by the
// run's 100 dues, not by the warm-up's too.
func TestRunOpenLoopBehindAfterWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One request every 10 ms; the first, due at the warm-up's start,
		// takes 3 s, past the run's end at 2 s.
		stuck := &stallAgent{fakeAgent: newFake(), t0: time.Now(), stall: 3 * time.Second}
		r, err := Run(context.Background(), Config{
			Peers: []Peer{{Via: ViaHTTP, Agent: stuck}}, Mix: Mix{OpSend: 1},
			Duration: time.Second, Warmup: time.Second, Rate: 100, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Requests != 0 || r.Behind != 100 {
			t.Errorf("%d requests, %d behind; want 0, 100 (the run's dues)", r.Requests, r.Behind)
		}
	})
}
