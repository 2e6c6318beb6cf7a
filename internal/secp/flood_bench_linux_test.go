package secp_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snapnode/snapnode/internal/secp"
)

// BenchmarkTablesFlood verifies, through a full Tables of 64 keys whose
// old keys are idle, a flood of valid signatures from fresh keys signing
// PromoteAfter messages each, the cheapest way to earn tables; each
// iteration also verifies a signature with the plain key, so that the
// ratio of the two (x-plain) is read at the same moments of a shared
// machine, in CPU time of the benchmark's thread. ns/op counts both, in
// wall time. replace-every=0 is the rule before the
// budget (a table whenever an idle key gives way), replace-every=48 the
// budget (ReplaceEvery). Run it with a fixed count of iterations long
// enough for the flood's steady state:
//
//	go test ./internal/secp -run '^$' -bench TablesFlood -benchtime 2048x -count 5
func BenchmarkTablesFlood(b *testing.B) {
	for _, every := range []uint64{0, secp.ReplaceEvery} {
		b.Run(fmt.Sprintf("replace-every=%d", every), func(b *testing.B) { benchFlood(b, every) })
	}
}

func benchFlood(b *testing.B, every uint64) {
	const size = 64
	_, p, d, sig := benchKeys(b)
	tables := secp.NewTables[int](size)
	tables.SetReplaceEvery(every)
	n, uses := 0, (*secp.Uses)(nil)
	fresh := func() (int, *secp.Uses) { // the next flood signature's key
		if n%secp.PromoteAfter == 0 {
			uses = new(secp.Uses)
		}
		n++
		return (n - 1) / secp.PromoteAfter, uses
	}
	// The old keys fill the places and fall idle; then a flood long
	// enough for its tables to fall idle in turn.
	for range size * secp.PromoteAfter {
		k, u := fresh()
		tables.Verified(k, p, u)
	}
	tables.Advance(secp.IdleVerifications(size) + 1)
	for range 8 * secp.IdleVerifications(size) {
		k, u := fresh()
		tables.Verified(k, p, u)
	}
	built := tables.Builds()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var flood, plain time.Duration
	for b.Loop() {
		k, u := fresh()
		t0 := threadCPU(b)
		ok := tables.Verify(k, p, u, d, sig)
		t1 := threadCPU(b)
		ok = p.Verify(d, sig) && ok
		t2 := threadCPU(b)
		flood, plain = flood+t1-t0, plain+t2-t1
		if !ok {
			b.Fatal("does not verify")
		}
	}
	b.ReportMetric(float64(flood.Microseconds())/float64(b.N), "flood-µs/verif")
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "plain-µs/verif")
	b.ReportMetric(float64(flood)/float64(plain), "x-plain")
	b.ReportMetric(1000*float64(tables.Builds()-built)/float64(b.N), "builds/1k-verif")
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("no thread CPU time: %v", err)
	}
	return time.Duration(ts.Nano())
}
