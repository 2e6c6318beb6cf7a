package node_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testutil"
)

// relayURLLine is `snapnode relay`'s line on starting.
var relayURLLine = regexp.MustCompile(`^snapnode relay listening url=(\S+)`)

// BenchmarkNostrRoundTripExternalRelay is BenchmarkNostrRoundTrip on the
// memory store with the relay in a process of its own (`snapnode relay`),
// the node reaching it as it would a public relay: the node's CPU per
// round trip is then its own work alone (reading the request from the
// relay, checking the event and the SNAP signature, answering), the
// relay's is reported apart (relay-cpu-µs/rt). Beside
// BenchmarkNostrRoundTrip's figure it says how much of the node's CPU the
// embedded relay is.
func BenchmarkNostrRoundTripExternalRelay(b *testing.B) {
	floor := cryptoPerRoundTrip(b)
	cmd := exec.Command(testutil.Binary(b), "relay", "--listen", "127.0.0.1:0", "--db", ":memory:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	m := relayURLLine.FindStringSubmatch(line)
	if m == nil {
		b.Fatalf("snapnode relay: %q, %v", line, err)
	}
	relayProc := &nodeProcess{cmd: cmd}
	n := startNodeProcess(b, "", "--identity-rate", "0", "--nostr-key-rate", "0", "--database", "memory", "--relay", m[1])
	n.ws = m[1] // the requesters reach the node through the same relay
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("requesters=%d", clients), func(b *testing.B) {
			r0 := relayProc.cpu(b)
			roundTrips(b, n, clients, floor)
			relayCPU := relayProc.cpu(b) - r0
			b.ReportMetric(float64(relayCPU/time.Duration(b.N))/float64(time.Microsecond), "relay-cpu-µs/rt")
		})
	}
}
