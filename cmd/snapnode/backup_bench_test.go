package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// BenchmarkSendDuringBackup measures how long `snapnode backup` holds up
// the node's writers: a node whose database holds -backup.tasks tasks
// (100,000; each a copy of a promoted write's, with its events) answers
// message/send (a promoted WRITE_FILE) over HTTP back to back from one
// requester while backup.Run copies it. It reports the backup's
// duration, the longest message/send before the backup (over as long a
// time) and during it, and their p99. docs/benchmarks.md has the figures.
func BenchmarkSendDuringBackup(b *testing.B) {
	b.Setenv(identity.EnvKey, "")
	n := benchTasks
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := filepath.Join(b.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	cfg.HTTPRate, cfg.IdentityRate = 0, 0
	k, err := identity.Generate()
	if err != nil {
		b.Fatal(err)
	}
	peer := &httpPeer{k: k, from: k.Address(identity.Mainnet)}
	send := func(ctx context.Context, nd *node.Node, i int) error {
		raw := peer.message(b, nd.Address(), "message/send",
			proposalMessage("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/f-%d.txt", i%64), "content": strconv.Itoa(i) + "\n"}))
		p, err := peer.post(ctx, nd, raw)
		if err != nil {
			return err
		}
		if c := code(p); c != 0 {
			return fmt.Errorf("message/send: %v", p)
		}
		return nil
	}

	// One real task, then n copies of it, with its events.
	ctx, stop := context.WithCancel(context.Background())
	a, err := node.Start(ctx, cfg, logger)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	if err := send(ctx, a, 0); err != nil {
		b.Fatal(err)
	}
	stop()
	if err := a.Wait(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dataDir, "tasks.db"))
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO tasks (id, owner, context_id, state, status_ts, status_message, version, idempotency_key, created_at, updated_at, history, artifacts, metadata)
		 WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
		 SELECT t.id || '-' || c.i, t.owner, t.context_id, t.state, t.status_ts, t.status_message, t.version, '', t.created_at, t.updated_at, t.history, t.artifacts, t.metadata
		 FROM c, (SELECT * FROM tasks LIMIT 1) t`,
		`INSERT INTO task_events (task_id, version, kind, body)
		 WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
		 SELECT e.task_id || '-' || c.i, e.version, e.kind, e.body
		 FROM c, task_events e WHERE e.task_id = (SELECT id FROM tasks ORDER BY rowid LIMIT 1)`,
	} {
		if _, err := db.Exec(q, n); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "tasks.db")); err == nil {
		b.Logf("tasks.db: %d tasks, %d MB", n+1, fi.Size()>>20)
	}

	ctx, stop = context.WithCancel(context.Background())
	defer stop()
	nd, err := node.Start(ctx, cfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer nd.Wait()
	defer stop()

	for i := 0; b.Loop(); i++ {
		// Sends for as long as fn runs, and returns their latencies.
		during := func(fn func()) []time.Duration {
			var lat []time.Duration
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for j := 1; ; j++ {
					select {
					case <-done:
						return
					default:
					}
					start := time.Now()
					if err := send(ctx, nd, j); err != nil {
						b.Error(err)
						return
					}
					lat = append(lat, time.Since(start))
				}
			})
			fn()
			close(done)
			wg.Wait()
			slices.Sort(lat)
			return lat
		}
		var took time.Duration
		out := filepath.Join(b.TempDir(), fmt.Sprint("backup-", i))
		in := during(func() {
			start := time.Now()
			if _, err := backup.Run(ctx, cfg, out, backup.Options{}); err != nil {
				b.Error(err)
			}
			took = time.Since(start)
		})
		before := during(func() { time.Sleep(took) })
		if len(in) == 0 || len(before) == 0 {
			b.Fatal("no message/send answered")
		}
		b.ReportMetric(took.Seconds(), "backup-s")
		b.ReportMetric(float64(len(in)), "sends-during")
		b.ReportMetric(float64(in[len(in)-1].Milliseconds()), "max-ms-during")
		b.ReportMetric(float64(latencyQuantile(in, 0.99).Milliseconds()), "p99-ms-during")
		b.ReportMetric(float64(before[len(before)-1].Milliseconds()), "max-ms-without")
		b.ReportMetric(float64(latencyQuantile(before, 0.99).Milliseconds()), "p99-ms-without")
		os.RemoveAll(out)
	}
}

// benchTasks is how many tasks BenchmarkSendDuringBackup's database holds.
const benchTasks = 100_000

// latencyQuantile is the p-quantile of sorted latencies (nearest rank).
func latencyQuantile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
