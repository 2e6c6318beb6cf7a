package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// fakeCPU is a CPU clock for which every measured run takes per.
type fakeCPU struct {
	mu    sync.Mutex
	now   time.Duration
	calls int
	per   time.Duration
}

func (c *fakeCPU) read() (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls%2 == 0 { // the end of a run
		c.now += c.per
	}
	return c.now, nil
}

// newCPUExecutor is an Executor on a SQLite file and a workspace holding
// a.txt, whose CPU clock is cpu.
func newCPUExecutor(t *testing.T, cpu cpuClock) (*Executor, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sb, err := sandbox.Open(dir, sandbox.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	e, err := New(ctx, Config{DB: db, Sandbox: sb, Policy: policy.NewHolder(policy.Default()), Audit: log,
		Defaults: proposal.NewDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	e.cpu = cpu
	return e, dir
}

// TestCPUCap: the CPU time of a run (measured around the sandbox's work)
// beyond max_cpu_ms, the host's or a peer's smaller one, fails the action
// before anything changes or is returned; where the host cannot measure
// CPU time, every action is refused naming the field.
func TestCPUCap(t *testing.T) {
	const requester = "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
	proposalOf := func(action string, args map[string]string) []byte {
		b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",
			"reasoning": "r", "action": action, "args": args})
		return b
	}
	descriptorOf := func(action string, args map[string]string, cpuMillis int64) []byte {
		p, err := proposal.Parse(proposalOf(action, args))
		if err != nil {
			t.Fatal(err)
		}
		d := proposal.Describe(p, proposal.NewDefaults())
		d.Resources.MaxCPUMillis = cpuMillis
		b, err := jsonv2.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := proposalOf("READ_FILE", map[string]string{"path": "/sandbox/a.txt"})
	write := proposalOf("WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b"})
	for _, tc := range []struct {
		name    string
		data    []byte
		per     time.Duration // CPU time of each measured run; -1: no clock
		outcome Outcome
		want    Failure
		wrote   bool
	}{
		{"read within the host's cap", read, 2000 * time.Millisecond, Completed, Failure{}, false},
		{"read beyond the host's cap", read, 2000*time.Millisecond + 1,
			Failed, Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: 2000, Got: 2001, Field: "/resources/max_cpu_ms"}, false},
		{"list beyond the host's cap", proposalOf("LIST_FILES", map[string]string{"path": "/sandbox/"}), 3 * time.Second,
			Failed, Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: 2000, Got: 3000, Field: "/resources/max_cpu_ms"}, false},
		{"write within the host's cap", write, time.Second, Completed, Failure{}, true},
		{"write beyond the host's cap: nothing promoted", write, 2500 * time.Millisecond,
			Failed, Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: 2000, Got: 2500, Field: "/resources/max_cpu_ms"}, false},
		{"a peer's smaller cap", descriptorOf("WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b"}, 100),
			150 * time.Millisecond,
			Failed, Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: 100, Got: 150, Field: "/resources/max_cpu_ms"}, false},
		{"a peer's larger cap is the host's", descriptorOf("READ_FILE", map[string]string{"path": "/sandbox/a.txt"}, 600000),
			2001 * time.Millisecond,
			Failed, Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: 2000, Got: 2001, Field: "/resources/max_cpu_ms"}, false},
		{"no CPU clock: refused", read, -1,
			Failed, Failure{Code: string(proposal.ErrValidation), Field: "/resources/max_cpu_ms"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock cpuClock
			if tc.per >= 0 {
				clock = (&fakeCPU{per: tc.per}).read
			}
			e, dir := newCPUExecutor(t, clock)
			res, err := e.Run(context.Background(), Request{TaskID: "t", Requester: requester, Data: tc.data})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%s), want %s", res.Outcome, res.Output, tc.outcome)
			}
			if _, err := os.Stat(filepath.Join(dir, "b.txt")); (err == nil) != tc.wrote {
				t.Errorf("b.txt written: %v, want %v", err == nil, tc.wrote)
			}
			if tc.outcome != Failed {
				return
			}
			var got struct {
				Failure
				Rule string `json:"rule"`
			}
			if err := json.Unmarshal(res.Output, &got); err != nil {
				t.Fatal(err)
			}
			f := got.Failure
			if f.Code != tc.want.Code || f.Limit != tc.want.Limit || f.Max != tc.want.Max || f.Got != tc.want.Got || f.Field != tc.want.Field {
				t.Errorf("output %s, want %+v", res.Output, tc.want)
			}
			if tc.per < 0 && got.Rule != "enforceableCap" {
				t.Errorf("rule %q, want enforceableCap", got.Rule)
			}
		})
	}
}

// TestThreadCPU: the host's clock counts the CPU time the pinned run
// spends.
func TestThreadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the thread's own CPU time is measured on Linux only")
	}
	e := &Executor{cpu: threadCPU}
	const want = 5 * time.Millisecond
	used, err := e.onThread(func() {
		start, _ := threadCPU()
		for {
			if now, _ := threadCPU(); now-start >= want {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if used < want || used > time.Minute {
		t.Fatalf("measured %v of CPU time, want at least %v", used, want)
	}
}
