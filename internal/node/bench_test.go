package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/loadgen"
	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// nodeProcess is `snapnode run` in its own process, so that its CPU time
// can be read apart from the requesters'.
type nodeProcess struct {
	cmd           *exec.Cmd
	addr, pub, ws string
	http          string // the /snap endpoint, or "" when HTTP is off
}

// startNodeProcess builds the binary and starts `snapnode run` on a free
// loopback port with its data in dataDir (a new temporary folder when
// empty) and any further args; it is interrupted at the end of the test.
func startNodeProcess(tb testing.TB, dataDir string, args ...string) *nodeProcess {
	tb.Helper()
	return startNodeProcessLogging(tb, dataDir, os.Stderr, args...)
}

// startNodeProcessLogging is startNodeProcess with the node's log going to
// stderr.
func startNodeProcessLogging(tb testing.TB, dataDir string, stderr io.Writer, args ...string) *nodeProcess {
	tb.Helper()
	return startNodeProcessVia(tb, dataDir, stderr, nil, args...)
}

// profileSeq numbers the node processes the benchmarks start, for the
// names of their profiles.
var profileSeq atomic.Int64

// startNodeProcessVia is startNodeProcessLogging with the command run
// through via (such as prlimit and its options), when not empty.
func startNodeProcessVia(tb testing.TB, dataDir string, stderr io.Writer, via []string, args ...string) *nodeProcess {
	tb.Helper()
	// A benchmark starts a node per b.N it tries (1 first, then the
	// count asked for): each writes its profile to a file of its own,
	// FILE.1, FILE.2… in the order they start, so that no node's profile
	// overwrites another's while it is written.
	seq := profileSeq.Add(1)
	if prof := os.Getenv("SNAPNODE_BENCH_CPUPROFILE"); prof != "" {
		args = append(args, "--cpuprofile", fmt.Sprintf("%s.%d", prof, seq))
	}
	if prof := os.Getenv("SNAPNODE_BENCH_MEMPROFILE"); prof != "" {
		args = append(args, "--memprofile", fmt.Sprintf("%s.%d", prof, seq))
	}
	if n := os.Getenv("SNAPNODE_BENCH_NODE_GOMAXPROCS"); n != "" && via == nil {
		// The node alone on n threads running Go code; the requesters in
		// this process keep theirs.
		via = []string{"env", "GOMAXPROCS=" + n}
	}
	d := testutil.StartDaemon(tb, testutil.DaemonOptions{DataDir: dataDir, Args: args, Stderr: stderr, Via: via})
	return &nodeProcess{cmd: d.Cmd, addr: d.Address, pub: d.NostrPub, ws: d.RelayURL, http: d.HTTPURL}
}

// cpu returns the process's user+system CPU time from /proc.
func (p *nodeProcess) cpu(b testing.TB) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}

// rusageThread is Linux's RUSAGE_THREAD: getrusage of the calling thread.
const rusageThread = 1

// threadCPU returns the CPU time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Skipf("no thread CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cryptoFloor is what a node must do at the least for one round trip of
// a known peer: verify the request event's signature and the SNAP
// signature with the peer's key tables (secp.Tables: a peer's keys earn
// theirs after 8 signatures), open and seal NIP-44 with a cached
// conversation key, sign the SNAP response and the reply event. The
// signatures are made and checked by the secp256k1 implementation the
// node is built with (the C library's with -tags libsecp256k1), as the
// node's are. The plain floor is the same with verification through a
// key without a table, as before tables existed (and as a peer's first
// 8 messages are verified).
type cryptoFloor struct {
	k      *identity.Key
	d      [32]byte
	sig    [64]byte
	pub    *secp.PublicKey // without a table
	pre    *secp.PublicKey // with its table
	ck     [32]byte
	msg    string
	sealed string
}

// cryptoPerRoundTrip prepares the floor's keys and messages for this run.
func cryptoPerRoundTrip(b *testing.B) *cryptoFloor {
	b.Logf("secp256k1 implementation: %s", secp.Implementation)
	k, _ := identity.Generate()
	peer, _ := identity.Generate()
	f := &cryptoFloor{k: k, d: sha256.Sum256([]byte("x")), msg: strings.Repeat("m", 900)}
	f.sig, _ = k.Sign(f.d)
	f.pub, _ = secp.ParsePublicKey(k.OutputKey())
	f.pre = f.pub.Precomputed()
	f.ck, _ = nip44.GenerateConversationKey(peer.NostrPublicKey(), k.NostrSecretKey())
	f.sealed, _ = nip44.Encrypt(f.msg, f.ck)
	return f
}

// measure times the floor once, in this thread's CPU time, as the node's
// is read in CPU time, so that other processes on a busy machine do not
// inflate the baseline (testing.Benchmark cannot run inside a benchmark).
func (f *cryptoFloor) measure(b *testing.B) (floor, plain time.Duration) {
	per := func(op func()) time.Duration {
		const n = 1000
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		op()
		t0 := threadCPU(b)
		for range n {
			op()
		}
		return (threadCPU(b) - t0) / n
	}
	verify := per(func() { f.pre.Verify(f.d, f.sig) })
	verifyPlain := per(func() { f.pub.Verify(f.d, f.sig) })
	sign := per(func() { f.k.Sign(f.d) })
	open := per(func() { nip44.Decrypt(f.sealed, f.ck) })
	seal := per(func() { nip44.Encrypt(f.msg, f.ck) })
	return 2*verify + 2*sign + open + seal, 2*verifyPlain + 2*sign + open + seal
}

// around times the floor just before and just after run and returns their
// mean. On a shared VM the speed of the same code drifts by tens of
// percent over minutes (another tenant on the core's sibling thread), and
// a floor timed once at the start of a benchmark of several parts
// compared the later parts' node CPU with a machine of another speed: the
// two readings bracket the node's own, and their spread is reported
// (crypto-drift-%) so that a run whose machine changed speed under it can
// be told apart.
func (f *cryptoFloor) around(b *testing.B, run func()) (floor, plain time.Duration) {
	before, plainBefore := f.measure(b)
	run()
	after, plainAfter := f.measure(b)
	mean := (before + after) / 2
	b.ReportMetric(100*float64((after-before).Abs())/float64(mean), "crypto-drift-%")
	return mean, (plainBefore + plainAfter) / 2
}

// BenchmarkNostrRoundTrip measures message/send round trips through the
// node's embedded relay on loopback, on each task store (memory, the
// default SQLite, and PostgreSQL when SNAPNODE_TEST_POSTGRES is set), with
// 1, 8 and 64 concurrent requesters:
// round trips per second, p50 and p99 latency, and the node's CPU per
// round trip beside the cryptographic work it cannot avoid.
func BenchmarkNostrRoundTrip(b *testing.B) {
	floor := cryptoPerRoundTrip(b)
	stores := []struct{ name, database string }{{"memory", "memory"}, {"sqlite", ""}}
	if os.Getenv(testdb.PostgresEnv) != "" {
		stores = append(stores, struct{ name, database string }{"postgres", testdb.Postgres(b)})
	} else {
		b.Logf("no PostgreSQL figures: %s is not set", testdb.PostgresEnv)
	}
	for _, store := range stores {
		// Unlimited: one requester's round trips would otherwise be
		// held to the per-identity and per-key rates.
		args := []string{"--identity-rate", "0", "--nostr-key-rate", "0"}
		if store.database != "" {
			args = append(args, "--database", store.database)
		}
		n := startNodeProcess(b, "", args...)
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("store=%s/requesters=%d", store.name, clients), func(b *testing.B) {
				roundTrips(b, n, clients, floor)
			})
		}
	}
}

// roundTrips runs b.N message/send round trips over Nostr against n from
// clients concurrent requesters and reports the figures.
func roundTrips(b *testing.B, n *nodeProcess, clients int, floor *cryptoFloor) {
	measure(b, n, clients, floor, func(b *testing.B) func() error { return nostrCaller(b, n) })
}

// nostrCaller returns a requester of its own sending message/send to n
// through the node's relay.
func nostrCaller(b *testing.B, n *nodeProcess) func() error {
	k, _ := identity.Generate()
	ctx, cancel := context.WithCancel(context.Background())
	p := relay.NewPool(relay.PoolConfig{URLs: []string{n.ws}, Logger: slog.New(slog.DiscardHandler)})
	p.Start(ctx)
	b.Cleanup(func() { cancel(); p.Close() })
	c := client.NewNostr(client.NostrConfig{Key: k, Relays: p, Logger: slog.New(slog.DiscardHandler)})
	target := client.Target{Address: n.addr, PubKey: n.pub}
	body := benchMessage()
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Request(ctx, target, client.NostrRequest{Method: "message/send", Payload: body})
		if err == nil {
			if e := snap.ResponseError(resp.Payload); e != nil {
				return e
			}
		}
		return err
	}
}

// benchMessage is the message/send payload measured: 500 bytes of text.
func benchMessage() []byte {
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m-bench", "role": "user",
		"parts": []any{map[string]any{"text": strings.Repeat("benchmark ", 50)}}}})
	return body
}

// httpCaller returns a requester of its own posting message/send to n's
// /snap endpoint over keep-alive connections.
func httpCaller(b *testing.B, n *nodeProcess, hc *http.Client) func() error {
	k, _ := identity.Generate()
	c := client.NewHTTP(client.HTTPConfig{Key: k, HTTP: hc})
	body := benchMessage()
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Send(ctx, n.http, &snap.Message{To: n.addr, Method: "message/send", Payload: body})
		if err == nil && snap.ResponseError(resp.Payload) != nil {
			err = snap.ResponseError(resp.Payload)
		}
		return err
	}
}

// measure runs b.N calls spread over clients concurrent requesters, each
// made by newCaller, against n and reports round trips per second, p50
// and p99 latency, and the node's CPU per round trip beside the
// cryptographic work a Nostr round trip cannot avoid.
func measure(b *testing.B, n *nodeProcess, clients int, floor *cryptoFloor, newCaller func(*testing.B) func() error) {
	calls := make([]func() error, clients)
	for i := range calls {
		calls[i] = newCaller(b)
	}
	// Warm: connections, conversation keys, and the key tables each
	// requester's keys earn (secp.PromoteAfter signatures): the figures
	// are a known peer's.
	for range secp.PromoteAfter {
		for _, call := range calls {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var cpu, elapsed time.Duration
	minCrypto, plainCrypto := floor.around(b, func() {
		b.ResetTimer()
		cpu0 := n.cpu(b)
		start := time.Now()
		var wg sync.WaitGroup
		for _, call := range calls {
			wg.Go(func() {
				for range work {
					t0 := time.Now()
					if err := call(); err != nil {
						b.Error(err)
					}
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed = time.Since(start)
		b.StopTimer()
		cpu = n.cpu(b) - cpu0
	})
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(latencyQuantile(lat, p)) / 1e6 }
	perRT := cpu / time.Duration(b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rt/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(perRT.Microseconds()), "node-cpu-µs/rt")
	b.ReportMetric(float64(minCrypto.Microseconds()), "crypto-µs/rt")
	b.ReportMetric(float64(perRT)/float64(minCrypto), "cpu/crypto")
	b.ReportMetric(float64(plainCrypto.Microseconds()), "plain-crypto-µs/rt")
	b.ReportMetric(float64(perRT)/float64(plainCrypto), "cpu/plain-crypto")
}

// BenchmarkTransports measures message/send round trips over HTTP (POST
// /snap) and over Nostr (the node's embedded relay) against the same node
// in the same run, with 1 and 64 concurrent requesters, on the memory
// store (the transports' own cost) and the default SQLite store. Every
// limit is off: the figures are the node's capacity.
func BenchmarkTransports(b *testing.B) {
	floor := cryptoPerRoundTrip(b)
	for _, store := range []struct{ name, database string }{{"memory", "memory"}, {"sqlite", ""}} {
		args := []string{"--http-listen", "127.0.0.1:0", "--http-rate", "0", "--identity-rate", "0", "--nostr-key-rate", "0"}
		if store.database != "" {
			args = append(args, "--database", store.database)
		}
		n := startNodeProcess(b, "", args...)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
		b.Cleanup(hc.CloseIdleConnections)
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/transport=http/clients=%d", store.name, clients), func(b *testing.B) {
				measure(b, n, clients, floor, func(b *testing.B) func() error { return httpCaller(b, n, hc) })
			})
			b.Run(fmt.Sprintf("store=%s/transport=nostr/clients=%d", store.name, clients), func(b *testing.B) {
				measure(b, n, clients, floor, func(b *testing.B) func() error { return nostrCaller(b, n) })
			})
		}
	}
}

// latencyQuantile is the p-quantile of sorted latencies, by the nearest
// rank as snapnode bench computes it.
func latencyQuantile(sorted []time.Duration, p float64) time.Duration {
	return loadgen.Percentile(sorted, p)
}

// TestLatencyQuantile checks the p50 and p99 the benchmarks report: the
// nearest rank, the smallest latency that at least p of them do not
// exceed (as snapnode bench's), not the one above it.
func TestLatencyQuantile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	for _, c := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{hundred, 0.50, 50},
		{hundred, 0.99, 99},
		{[]time.Duration{1, 2}, 0.5, 1},
		{[]time.Duration{7}, 0.99, 7},
	} {
		if got := latencyQuantile(c.sorted, c.p); got != c.want {
			t.Errorf("p%v of %d latencies = %v, want %v", c.p*100, len(c.sorted), got, c.want)
		}
	}
}
