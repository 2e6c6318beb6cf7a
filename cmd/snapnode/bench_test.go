package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/loadgen"
	"github.com/snapnode/snapnode/internal/testutil"
)

// TestBenchCommand runs `snapnode bench` for two seconds against a real
// node (its own process, with its embedded relay and HTTP) and checks the
// report's fields: every transport and request kind was driven without an
// error, the figures are consistent, and the node's CPU and memory were
// read through its admin socket. It checks no timing.
func TestBenchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for seconds")
	}
	d := testutil.StartDaemon(t, testutil.DaemonOptions{Args: []string{"--http-listen", "127.0.0.1:0",
		"--identity-rate", "0", "--nostr-key-rate", "0", "--http-rate", "0"}})
	var stdout, stderr bytes.Buffer
	tasksOut := filepath.Join(t.TempDir(), "tasks")
	code := run([]string{"bench", "--to", d.Address, "--relay", d.RelayURL, "--http", d.HTTPURL,
		"--peers", "6", "--duration", "2s", "--mix", "send=50,get=40,stream=10", "--data-dir", d.DataDir, "--json",
		"--tasks-out", tasksOut},
		nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var r loadgen.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if r.Peers != 6 || r.Mix != "send=50,get=40,stream=10" || r.Duration.Seconds() < 2 {
		t.Errorf("peers %d, mix %q, duration %v", r.Peers, r.Mix, r.Duration)
	}
	if r.Requests == 0 || r.Errors != 0 || len(r.ErrorsByKind) != 0 {
		t.Fatalf("%d requests, %d errors %v", r.Requests, r.Errors, r.ErrorsByKind)
	}
	if r.Throughput <= 0 {
		t.Errorf("throughput %v", r.Throughput)
	}
	driven := map[string]bool{}
	var sum int64
	for _, s := range r.Series {
		driven[s.Via+" "+s.Op] = true
		sum += s.Requests
		if l := s.Latency; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max || l.Max > r.Latency.Max {
			t.Errorf("%s %s latency %+v: not ordered", s.Via, s.Op, l)
		}
	}
	if sum != r.Requests {
		t.Errorf("series add up to %d, requests %d", sum, r.Requests)
	}
	for _, via := range []string{"nostr", "http", "ws"} {
		for _, op := range []string{"send", "get"} {
			if !driven[via+" "+op] {
				t.Errorf("no %s over %s in %v", op, via, driven)
			}
		}
	}
	if driven["nostr stream"] || driven["http stream"] || driven["ws stream"] {
		if r.StreamEvents == 0 {
			t.Error("streams made, no event received")
		}
	}
	// --tasks-out lists each task a send or stream was answered with.
	raw, err := os.ReadFile(tasksOut)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(raw))
	var made int64
	for _, s := range r.Series {
		if s.Op != "get" {
			made += s.Requests
		}
	}
	distinct := map[string]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	if int64(len(ids)) != made || len(distinct) != len(ids) {
		t.Errorf("--tasks-out lists %d tasks (%d distinct); %d sends and streams were answered", len(ids), len(distinct), made)
	}
	if r.Node == nil {
		t.Fatalf("no node figures: %s", r.NodeError)
	}
	if r.Node.CPU <= 0 || r.Node.RSS <= 0 || r.Node.PeakRSS < r.Node.RSS || r.Node.CPUPerRequest <= 0 {
		t.Errorf("node %+v", *r.Node)
	}
}

// TestBenchOpenLoop runs `snapnode bench --rate 50 --warmup 500ms` for a
// second against a real node over Nostr: the report is of an open loop
// after its warm-up, and every one of the 50 requests due in the second
// was made or counted as behind (none more: the schedule, not the node's
// speed, sets how many are sent).
func TestBenchOpenLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for seconds")
	}
	d := testutil.StartDaemon(t, testutil.DaemonOptions{Args: []string{"--identity-rate", "0", "--nostr-key-rate", "0"}})
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--to", d.Address, "--relay", d.RelayURL, "--peers", "2", "--duration", "1s",
		"--warmup", "500ms", "--rate", "50", "--mix", "send=1", "--json"}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var r loadgen.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if r.Rate != 50 || r.Warmup.Milliseconds() != 500 || r.Errors != 0 {
		t.Errorf("rate %v, warm-up %v, %d errors %v; want 50/s after 500ms, none", r.Rate, r.Warmup, r.Errors, r.ErrorsByKind)
	}
	if r.Requests+r.Behind != 50 {
		t.Errorf("%d requests made and %d behind; want the 50 due in the second", r.Requests, r.Behind)
	}
}

// TestBenchUsage checks that bad flags are refused with exit status 2 and
// a message naming the flag.
func TestBenchUsage(t *testing.T) {
	const addr = "bc1p3n2t6rerzvqwcgeepwqv27fs52chkks8qrwzzj3qyscxxa0djfzqu8752n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--relay", "ws://x"}, "--to ADDRESS is required"},
		{[]string{"--to", addr}, "--relay URL"},
		{[]string{"--to", "bc1qnope", "--relay", "ws://x"}, "--to:"},
		{[]string{"--to", addr, "--relay", "ws://x", "--mix", "send=1,post=2"}, `--mix: invalid mix: item "post=2"`},
		{[]string{"--to", addr, "--relay", "ws://x", "--peers", "0"}, "--peers"},
		{[]string{"--to", addr, "--relay", "ws://x", "--pid", "1", "--data-dir", "d"}, "--pid or --data-dir"},
		{[]string{"--to", addr, "--relay", "ws://x", "--pid", "0"}, `"0": want a process id`},
		{[]string{"--to", addr, "--http", "ftp://x"}, "want an http://"},
		{[]string{"--to", addr, "--relay", "ws://x", "--seeded", "10"}, "--seeded needs --peer-seed"},
		{[]string{"--to", addr, "--relay", "ws://x", "--rate", "-5"}, "--rate -5: want 0"},
		{[]string{"--to", addr, "--relay", "ws://x", "--rate", "NaN"}, "--rate NaN: want 0"},
		{[]string{"--to", addr, "--relay", "ws://x", "--warmup", "-1s"}, "--warmup: want 0 or more"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench"}, c.args...), nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("bench %v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
