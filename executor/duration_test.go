package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testclock"
)

// TestDurationOfTheWholeAction: max_duration_ms bounds all of an action's
// work in the sandbox together, not each sandbox call: a composite whose
// steps each take 400 ms by the executor's clock fails once their sum is
// over the cap, before anything is promoted, while the same steps fit a
// larger cap and a single step fits the smaller one.
func TestDurationOfTheWholeAction(t *testing.T) {
	const requester = "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
	clock := testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	defaults := proposal.NewDefaults()
	defaults.Now = clock.Now
	leaf := func(action string, args map[string]string) *proposal.Descriptor {
		b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",
			"reasoning": "r", "action": action, "args": args})
		p, err := proposal.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return proposal.Describe(p, defaults)
	}
	withCap := func(millis int64, children ...*proposal.Descriptor) []byte {
		for _, c := range children {
			c.Resources.MaxDurationMillis = millis
		}
		d := children[0]
		if len(children) > 1 {
			var err error
			if d, err = proposal.Compose(children, defaults); err != nil {
				t.Fatal(err)
			}
		}
		d.Resources.MaxDurationMillis = millis
		b, err := jsonv2.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func() *proposal.Descriptor { return leaf("READ_FILE", map[string]string{"path": "/sandbox/a.txt"}) }
	write := func() *proposal.Descriptor {
		return leaf("WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b"})
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		fails bool
		got   int64 // milliseconds, when it fails
	}{
		{"one read, 400 ms of 1000", withCap(1000, read()), false, 0},
		{"three reads, 1200 ms of 1000", withCap(1000, read(), read(), read()), true, 1200},
		{"three reads and a write, 2000 ms of 1000: nothing written", withCap(1000, read(), read(), read(), write()), true, 2000},
		{"three reads and a write, 2000 ms of 2000", withCap(2000, read(), read(), read(), write()), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, dir := newCPUExecutor(t, (&fakeCPU{per: time.Millisecond}).read)
			e.now = clock.Now
			e.beforeStep = func() { clock.Advance(400 * time.Millisecond) }
			res, err := e.Run(context.Background(), Request{TaskID: "t", Requester: requester, Data: tc.data})
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "b.txt"))
			if !tc.fails {
				if res.Outcome == Failed {
					t.Fatalf("failed: %s", res.Output)
				}
				return
			}
			if statErr == nil {
				t.Error("b.txt was written by an action over its duration")
			}
			var f Failure
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Failed || f.Code != CodeLimitExceeded || f.Limit != string(sandbox.LimitDuration) ||
				f.Max != 1000 || f.Got != tc.got || f.Field != "/resources/max_duration_ms" {
				t.Errorf("outcome %s, output %s; want LIMIT_EXCEEDED duration 1000, got %d", res.Outcome, res.Output, tc.got)
			}
		})
	}
}
