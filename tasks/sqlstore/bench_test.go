package sqlstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/tasks"
)

// benchStores runs fn against the in-memory store and both SQL dialects in
// one run, so that their figures compare:
//
//	SNAPNODE_TEST_POSTGRES=postgres://… go test -run '^$' -bench . -benchmem ./tasks/sqlstore
func benchStores(b *testing.B, fn func(b *testing.B, s tasks.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: math.MaxInt})) })
	b.Run("sqlite", func(b *testing.B) { fn(b, open(b, sqliteDSN(b), Options{})) })
	b.Run("sqlite-normal", func(b *testing.B) { fn(b, open(b, sqliteDSN(b), Options{Synchronous: "NORMAL"})) })
	b.Run("postgres", func(b *testing.B) { fn(b, open(b, postgresSchemaDSN(b), Options{})) })
}

// BenchmarkCreate creates tasks one after another: the latency of one
// durable write (an fsync on SQLite FULL and PostgreSQL).
func BenchmarkCreate(b *testing.B) {
	benchStores(b, func(b *testing.B, s tasks.Store) {
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := s.Create(ctx, task(fmt.Sprintf("t%d", i), "alice")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreateParallel creates tasks from GOMAXPROCS×8 goroutines, as a
// busy node does: SQLite's group commit shares each fsync.
func BenchmarkCreateParallel(b *testing.B) {
	benchStores(b, func(b *testing.B, s tasks.Store) {
		ctx := context.Background()
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Create(ctx, task(fmt.Sprintf("t%d", n.Add(1)), "alice")); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkGet reads random tasks of a store holding 10,000.
func BenchmarkGet(b *testing.B) {
	const size = 10_000
	benchStores(b, func(b *testing.B, s tasks.Store) {
		ctx := context.Background()
		fill(b, s, size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Get(ctx, fmt.Sprintf("t%d", rand.IntN(size))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fill creates tasks t0…t(n-1) from 16 goroutines.
func fill(b *testing.B, s tasks.Store, n int) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := s.Create(context.Background(), task(fmt.Sprintf("t%d", i), "alice")); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
