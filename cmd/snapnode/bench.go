package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/loadgen"
	"github.com/snapnode/snapnode/internal/memlimit"
)

// bench is `snapnode bench`: a load of simulated peers on a node.
func (c *cli) bench(args []string) int {
	fs := c.flagSet("bench")
	var (
		to, via, mixFlag, dataDir, peerSeed, tasksOut string
		relays, httpURLs                              []string
		pids                                          []int
		peers, seeded, owners                         int
		duration, timeout, warmup                     time.Duration
		rate                                          float64
		asJSON                                        bool
	)
	fs.StringVar(&to, "to", "", "the node's P2TR `ADDRESS` (required)")
	fs.Func("relay", "send Nostr requests through the relay at `URL` (repeatable; required)", func(v string) error {
		relays = append(relays, v)
		return nil
	})
	fs.Func("http", "the node's SNAP endpoint `URL` (http(s)://host:port[/snap]) for the HTTP and WebSocket peers (repeatable: one per replica, the peers taking them in turn)", func(v string) error {
		u, err := endpointURL(v)
		httpURLs = append(httpURLs, u)
		return err
	})
	fs.StringVar(&via, "via", "", "the transports the peers take in turn, a comma-separated `LIST` of nostr, http, ws (default nostr, and http,ws with --http)")
	fs.IntVar(&peers, "peers", 8, "simulate `N` peers")
	fs.DurationVar(&duration, "duration", 30*time.Second, "start requests for `DURATION`")
	fs.DurationVar(&warmup, "warmup", 0, "run the load for `DURATION` before --duration without counting it (connections opened, caches warm)")
	fs.Float64Var(&rate, "rate", 0, "offer `N` requests a second between the peers, each on a fixed schedule, latencies counted from when each was due (0: each peer sends when answered)")
	fs.StringVar(&mixFlag, "mix", loadgen.DefaultMix().String(), "the requests' weights, `NAME=WEIGHT,…` of send, get, stream")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "count a request without an answer after `DURATION` as a time-out")
	fs.Func("pid", "read the node's CPU and memory from /proc of `PID` (repeatable: one per replica, reported each and summed)", func(v string) error {
		pid, err := strconv.Atoi(v)
		if err != nil || pid < 1 {
			return fmt.Errorf("%q: want a process id, a whole number from 1", v)
		}
		pids = append(pids, pid)
		return nil
	})
	fs.StringVar(&dataDir, "data-dir", "", "find the node's pid from the admin socket in `DIR` (the node's data folder)")
	fs.StringVar(&peerSeed, "peer-seed", "", "derive the peers' keys from `SEED` (default: new random keys), to be the owners of a seeded store")
	fs.IntVar(&seeded, "seeded", 0, "tasks/get asks for random tasks of a store seeded with `N` tasks with --peer-seed (see docs/benchmarks.md)")
	fs.IntVar(&owners, "owners", 50, "the seeded store's `N` owners: peer i asks for the tasks of owner i")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON (durations in nanoseconds)")
	fs.StringVar(&tasksOut, "tasks-out", "", "write the id of each task a message/send or message/stream was answered with to `FILE`, one a line (to compare with the node's store)")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	switch {
	case to == "":
		return c.usageError(fs, "--to ADDRESS is required")
	case len(relays) == 0 && len(httpURLs) == 0:
		return c.usageError(fs, "--relay URL (or --http URL with --via http,ws) is required")
	case peers < 1:
		return c.usageError(fs, "--peers: want 1 or more")
	case duration <= 0:
		return c.usageError(fs, "--duration: want more than 0")
	case warmup < 0:
		return c.usageError(fs, "--warmup: want 0 or more")
	case !(rate >= 0) || math.IsInf(rate, 0):
		return c.usageError(fs, fmt.Sprintf("--rate %g: want 0 (each peer sends when answered) or a finite number of requests a second", rate))
	case len(pids) > 0 && dataDir != "":
		return c.usageError(fs, "give --pid or --data-dir, not both")
	case seeded < 0 || owners < 1:
		return c.usageError(fs, "--seeded: want 0 or more, --owners 1 or more")
	case seeded > 0 && (peerSeed == "" || peers > owners):
		return c.usageError(fs, "--seeded needs --peer-seed and at most --owners peers")
	}
	if _, err := identity.ParseAddress(to); err != nil {
		return c.usageError(fs, "--to: "+err.Error())
	}
	mix, err := loadgen.ParseMix(mixFlag)
	if err != nil {
		return c.usageError(fs, "--mix: "+err.Error())
	}
	target := loadgen.Target{To: to, Relays: relays, HTTP: httpURLs}
	switch {
	case via != "":
		target.Via = strings.Split(via, ",")
	case len(httpURLs) > 0 && len(relays) > 0:
		target.Via = []string{loadgen.ViaNostr, loadgen.ViaHTTP, loadgen.ViaWS}
	case len(httpURLs) > 0:
		target.Via = []string{loadgen.ViaHTTP, loadgen.ViaWS}
	default:
		target.Via = []string{loadgen.ViaNostr}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	defer memlimit.Hold(context.Background(), loadgen.Memory)()
	cfg := loadgen.Config{Mix: mix, Duration: duration, Timeout: timeout, Warmup: warmup, Rate: rate}
	if dataDir != "" {
		pid, err := loadgen.SocketPID(ctx, admin.Path(dataDir))
		if err != nil {
			return c.fail("snapnode bench", err)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		cfg.Nodes = append(cfg.Nodes, func() (loadgen.ProcStat, error) { return loadgen.ReadProc(pid) })
	}
	closeTasks := func() error { return nil }
	if tasksOut != "" {
		f, err := os.Create(tasksOut)
		if err != nil {
			return c.ioError("snapnode bench", err)
		}
		defer f.Close() // on the early returns; closeTasks reports the error
		var mu sync.Mutex
		w := bufio.NewWriter(f)
		cfg.Answered = func(id string) {
			mu.Lock()
			defer mu.Unlock()
			w.WriteString(id + "\n") // an error stays in w for Flush
		}
		closeTasks = func() error {
			if err := errors.Join(w.Flush(), f.Close()); err != nil {
				return fmt.Errorf("--tasks-out: %w", err)
			}
			return nil
		}
	}
	if seeded > 0 {
		cfg.Seeded = loadgen.SeededTasks(seeded, owners)
	}
	keys, err := loadgen.Keys(peers, peerSeed)
	if err != nil {
		return c.fail("snapnode bench", err)
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	peerList, closePeers, err := loadgen.Dial(ctx, target, keys, logger)
	if err != nil {
		return c.fail("snapnode bench", err)
	}
	defer closePeers()
	cfg.Peers = peerList
	report, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return c.fail("snapnode bench", err)
	}
	if asJSON {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return c.fail("snapnode bench", err)
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
	} else if err := report.WriteText(c.stdout); err != nil {
		return c.fail("snapnode bench", err)
	}
	if err := closeTasks(); err != nil {
		return c.fail("snapnode bench", err)
	}
	return exitOK
}
