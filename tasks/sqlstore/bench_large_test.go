package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/snapnode/snapnode/tasks/taskstest"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// BenchmarkTasksGetLargeStore measures tasks/get through the Service
// (payload parsing, ownership, the store's Get) on a SQLite store holding
// SNAPNODE_BENCH_TASKS tasks (default 1,000,000), beside the same on a
// store of 10,000 in the same run, and reports p50 and p99 latency:
//
//	go test ./tasks/sqlstore -run '^$' -bench TasksGetLargeStore -benchtime 20000x
//
// The large store is loaded with bulk transactions (10,000 rows each, with
// each task's creation event), not through Create, to keep loading to a
// minute; the rows are what Create writes.
func BenchmarkTasksGetLargeStore(b *testing.B) {
	large := 1_000_000
	if v := os.Getenv("SNAPNODE_BENCH_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SNAPNODE_BENCH_TASKS=%q", v)
		}
		large = n
	}
	for _, size := range []int{10_000, large} {
		s := open(b, sqliteDSN(b), Options{})
		start := time.Now()
		bulkLoad(b, s, size)
		b.Logf("loaded %d tasks in %v", size, time.Since(start).Round(time.Second))
		svc := tasks.NewService(s, tasks.ServiceOptions{})
		b.Run(fmt.Sprintf("tasks=%d", size), func(b *testing.B) {
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for b.Loop() {
				i := rand.IntN(size)
				payload := []byte(`{"taskId":"` + bulkID(i) + `","historyLength":10}`)
				t0 := time.Now()
				t, err := taskstest.Get(ctx, svc, bulkOwner(i), payload)
				lat = append(lat, time.Since(t0))
				if err != nil || t.ID != bulkID(i) {
					b.Fatalf("GetTask %d: %v", i, err)
				}
			}
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e3 }
			b.ReportMetric(q(0.50), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
		})
	}
}

func bulkID(i int) string    { return fmt.Sprintf("task-%08d", i) }
func bulkOwner(i int) string { return fmt.Sprintf("bc1p-owner-%04d", i%1000) }

// bulkLoad writes tasks 0…n-1 (1,000 owners, one history message each,
// a tenth of them completed) in transactions of 10,000.
func bulkLoad(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 10_000
	for lo := 0; lo < n; lo += batch {
		err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			insert, event := tx.StmtContext(ctx, s.st.insertTask), tx.StmtContext(ctx, s.st.insertEvent)
			for i := lo; i < min(lo+batch, n); i++ {
				at := base.Add(time.Duration(i) * time.Millisecond)
				state := tasks.StateSubmitted
				if i%10 == 0 {
					state = tasks.StateCompleted
				}
				t := &tasks.Task{
					ID: bulkID(i), ContextID: "ctx-" + bulkID(i), Owner: bulkOwner(i), CreatedAt: at, Version: 1,
					Status: tasks.Status{State: state, Timestamp: at},
					History: []tasks.Message{{MessageID: "m-" + bulkID(i), Role: tasks.RoleUser, Parts: []tasks.Part{
						tasks.TextPart("Summarize the README and list the open issues, please."),
						tasks.DataPart(json.RawMessage(`{"schema_version":"1.0.0","action":"READ_FILE","args":{"path":"/sandbox/README.md"}}`)),
					}}},
				}
				r, err := encode(t)
				if err != nil {
					return err
				}
				if _, err := insert.ExecContext(ctx, r.id, r.owner, r.contextID, r.state, r.statusTS, r.statusMessage, r.idemKey,
					r.createdAt, r.createdAt, string(r.history), string(r.artifacts), string(r.metadata)); err != nil {
					return err
				}
				ev, _ := json.Marshal(tasks.StatusEvent(t))
				if _, err := event.ExecContext(ctx, r.id, 1, string(tasks.EventStatus), string(ev)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
