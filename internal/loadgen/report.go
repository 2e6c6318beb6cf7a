package loadgen

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"
)

// Report is what a run measured. Durations are in nanoseconds in JSON.
type Report struct {
	Peers int    `json:"peers"`
	Mix   string `json:"mix"`
	// Duration is how long requests were started: the run's duration, or
	// less when it was stopped. InFlight requests were still waiting for
	// their answers at its end; Drain is how long they were waited for.
	Duration time.Duration `json:"duration"`
	InFlight int64         `json:"inFlight"`
	Drain    time.Duration `json:"drain"`
	// Warmup is how long the load ran, uncounted, before Duration.
	Warmup time.Duration `json:"warmup,omitempty"`
	// Rate is the requests a second offered in an open loop (0: a closed
	// loop). Behind counts the requests due within Duration that their
	// peers, still waiting for earlier answers, had not started by its end:
	// the node fell that far behind the offered rate.
	Rate   float64 `json:"rate,omitempty"`
	Behind int64   `json:"behind,omitempty"`
	// Requests counts every request answered or failed, those in flight
	// at the end included. Throughput is those answered or failed within
	// Duration, per second of it: the waits for the last ones, with fewer
	// and fewer requests in flight, are not in it.
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	Throughput float64 `json:"throughput"`
	// Latency is every request's, whatever its kind and transport.
	Latency Latency `json:"latency"`
	// Series are the requests of one kind over one transport.
	Series []Series `json:"series"`
	// ErrorsByKind counts the failures by ErrorKind.
	ErrorsByKind map[string]int64 `json:"errorsByKind"`
	// StreamEvents counts the events received in streams.
	StreamEvents int64 `json:"streamEvents"`
	// Node is the node's CPU and memory, when it was read: of all its
	// processes together (CPU, RSS and peaks summed) when several were
	// read, each of them then in Processes, in the order given. NodeError
	// says why they could not be read at the end.
	Node      *NodeStats  `json:"node,omitempty"`
	Processes []NodeStats `json:"processes,omitempty"`
	NodeError string      `json:"nodeError,omitempty"`
}

// Latency is the percentiles of a set of requests' latencies.
type Latency struct {
	P50  time.Duration `json:"p50"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// Series is the requests of one kind (send, get, stream) over one
// transport.
type Series struct {
	Via      string  `json:"via"`
	Op       string  `json:"op"`
	Requests int64   `json:"requests"`
	Latency  Latency `json:"latency"`
}

// NodeStats is the node's use of the machine during the run: CPU time
// spent (and in cores, CPU over wall time; per request), and its resident
// memory at the end and at its peak since it started (VmHWM).
type NodeStats struct {
	CPU           time.Duration `json:"cpu"`
	Cores         float64       `json:"cores"`
	CPUPerRequest time.Duration `json:"cpuPerRequest"`
	RSS           int64         `json:"rss"`
	PeakRSS       int64         `json:"peakRSS"`
	// PeakBeforeRun says PeakRSS did not rise during the run: it was
	// reached before it (at start, in an earlier run…), and the run's own
	// peak is not known, only that it was at most PeakRSS. Of a sum, it
	// says so of one process at least.
	PeakBeforeRun bool `json:"peakBeforeRun,omitempty"`
}

func newReport(cfg Config, results []*peerResult, elapsed time.Duration) *Report {
	r := &Report{Peers: len(cfg.Peers), Mix: cfg.Mix.String(), Duration: min(elapsed, cfg.Duration),
		Warmup: cfg.Warmup, Rate: cfg.Rate, ErrorsByKind: map[string]int64{}}
	r.Drain = elapsed - r.Duration
	all := newLatencies(maxSamples, cfg.Seed)
	bySeries := map[series]*latencies{}
	for _, pr := range results {
		for s, l := range pr.lat {
			if bySeries[s] == nil {
				bySeries[s] = newLatencies(maxSamples, cfg.Seed+1)
			}
			bySeries[s].merge(l)
			all.merge(l)
		}
		for k, n := range pr.errs {
			r.ErrorsByKind[k] += n
			r.Errors += n
		}
		r.StreamEvents += pr.events
		r.InFlight += pr.late
		r.Behind += pr.behind
	}
	r.Requests = all.n
	r.Latency = all.summary()
	if r.Duration > 0 {
		r.Throughput = float64(r.Requests-r.InFlight) / r.Duration.Seconds()
	}
	for s, l := range bySeries {
		r.Series = append(r.Series, Series{Via: s.via, Op: s.op.String(), Requests: l.n, Latency: l.summary()})
	}
	slices.SortFunc(r.Series, func(a, b Series) int {
		return cmp.Or(cmp.Compare(a.Via, b.Via), cmp.Compare(a.Op, b.Op))
	})
	return r
}

// WriteText writes r for a person to read.
func (r *Report) WriteText(w io.Writer) error {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "peers %d, mix %s, %.1f s: %d requests, %.1f/s, %d errors\n",
		r.Peers, r.Mix, r.Duration.Seconds(), r.Requests, r.Throughput, r.Errors)
	if r.Warmup > 0 {
		fmt.Fprintf(tw, "after a warm-up of %.1f s, not counted\n", r.Warmup.Seconds())
	}
	if r.Rate > 0 {
		fmt.Fprintf(tw, "open loop: %.1f requests/s offered, latencies from when each was due\n", r.Rate)
	}
	if r.Behind > 0 {
		fmt.Fprintf(tw, "%d requests due in the run were not started by its end: the node fell behind the offered rate\n", r.Behind)
	}
	if r.InFlight > 0 {
		fmt.Fprintf(tw, "%d requests in flight at the end, waited for %.2f s more: counted, not in the rate\n",
			r.InFlight, r.Drain.Seconds())
	}
	fmt.Fprintln(tw, "via\top\trequests\tp50\tp99\tp999\tmax\t")
	for _, s := range r.Series {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.Via, s.Op, s.Requests,
			ms(s.Latency.P50), ms(s.Latency.P99), ms(s.Latency.P999), ms(s.Latency.Max))
	}
	fmt.Fprintf(tw, "all\t\t%d\t%s\t%s\t%s\t%s\t\n", r.Requests,
		ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999), ms(r.Latency.Max))
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.StreamEvents > 0 {
		fmt.Fprintf(w, "stream events received: %d\n", r.StreamEvents)
	}
	for _, k := range slices.Sorted(maps.Keys(r.ErrorsByKind)) {
		fmt.Fprintf(w, "errors %s: %d\n", k, r.ErrorsByKind[k])
	}
	node := func(name string, s NodeStats) {
		when := ""
		if s.PeakBeforeRun {
			when = " before the run"
		}
		fmt.Fprintf(w, "%s: CPU %.2f s (%.2f cores), %.0f µs per request; RSS %.1f MiB, peak %.1f MiB%s\n",
			name, s.CPU.Seconds(), s.Cores, float64(s.CPUPerRequest)/1e3,
			float64(s.RSS)/(1<<20), float64(s.PeakRSS)/(1<<20), when)
	}
	switch {
	case r.Node != nil:
		name := "node"
		if len(r.Processes) > 0 {
			name = fmt.Sprintf("node (%d processes)", len(r.Processes))
		}
		node(name, *r.Node)
		for i, p := range r.Processes {
			node(fmt.Sprintf("  process %d", i+1), p)
		}
	case r.NodeError != "":
		fmt.Fprintf(w, "node: not read: %s\n", r.NodeError)
	}
	return nil
}
