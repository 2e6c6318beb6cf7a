package loadgen

import (
	"bytes"
	"flag"
	"os"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestWriteTextGolden(t *testing.T) {
	r := &Report{
		Peers: 8, Mix: "send=70,get=25,stream=5", Duration: 30 * time.Second, InFlight: 8, Drain: 120 * time.Millisecond, Requests: 12345, Errors: 3, Throughput: 411.5,
		Latency: Latency{P50: 1500 * time.Microsecond, P99: 9 * time.Millisecond, P999: 20 * time.Millisecond, Max: 31 * time.Millisecond},
		Series: []Series{
			{Via: "http", Op: "get", Requests: 3000, Latency: Latency{P50: 700 * time.Microsecond, P99: 2 * time.Millisecond, P999: 3 * time.Millisecond, Max: 4 * time.Millisecond}},
			{Via: "nostr", Op: "send", Requests: 9345, Latency: Latency{P50: 2 * time.Millisecond, P99: 9 * time.Millisecond, P999: 20 * time.Millisecond, Max: 31 * time.Millisecond}},
		},
		ErrorsByKind: map[string]int64{"timeout": 1, "snap 5003": 2},
		StreamEvents: 1800,
		Node:         &NodeStats{CPU: 45 * time.Second, Cores: 1.5, CPUPerRequest: 3645 * time.Microsecond, RSS: 60 << 20, PeakRSS: 64 << 20},
	}
	checkGolden(t, r, "testdata/report.golden")
	// A node of two processes: the sums, then each.
	r.Processes = []NodeStats{
		{CPU: 20 * time.Second, Cores: 0.67, CPUPerRequest: 1620 * time.Microsecond, RSS: 28 << 20, PeakRSS: 30 << 20},
		{CPU: 25 * time.Second, Cores: 0.83, CPUPerRequest: 2025 * time.Microsecond, RSS: 32 << 20, PeakRSS: 34 << 20},
	}
	checkGolden(t, r, "testdata/report-processes.golden")
}

func checkGolden(t *testing.T, r *Report, golden string) {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("report:\n%s\nwant (%s):\n%s", buf.Bytes(), golden, want)
	}
}

func TestKeys(t *testing.T) {
	a, err := Keys(3, "s")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Keys(3, "s")
	c, _ := Keys(3, "")
	for i := range a {
		if a[i].Hex() != b[i].Hex() {
			t.Errorf("key %d of the same seed differs", i)
		}
		if a[i].Hex() == c[i].Hex() {
			t.Errorf("key %d without a seed is the seeded one", i)
		}
	}
	if a[0].Hex() == a[1].Hex() || c[0].Hex() == c[1].Hex() {
		t.Error("two peers share a key")
	}
}
