package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/loadgen"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

func main() {
	var (
		dsn, seed          string
		n, owners, batch   int
		age                time.Duration
		testnet, countOnly bool
	)
	flag.StringVar(&dsn, "database", "", "the node's task database: a SQLite file (DIR/tasks.db) or a postgres:// URL (required)")
	flag.IntVar(&n, "tasks", 1_000_000, "seed `N` tasks")
	flag.IntVar(&owners, "owners", 50, "spread them over `N` owners")
	flag.StringVar(&seed, "peer-seed", "bench", "derive the owners' keys from `SEED` (as snapnode bench --peer-seed)")
	flag.IntVar(&batch, "batch", 10_000, "write `N` tasks a transaction")
	flag.DurationVar(&age, "age", 48*time.Hour, "the first task's status time is `AGE` ago")
	flag.BoolVar(&testnet, "testnet", false, "owners' addresses on testnet (for a node run with --testnet)")
	flag.BoolVar(&countOnly, "count", false, "print the tasks by state and exit")
	flag.Parse()
	if dsn == "" || n < 0 || owners < 1 || batch < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), dsn, seed, n, owners, batch, age, testnet, countOnly); err != nil {
		fmt.Fprintln(os.Stderr, "seedtasks:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, seed string, n, owners, batch int, age time.Duration, testnet, countOnly bool) error {
	s, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	if countOnly {
		counts, err := s.CountByState(ctx)
		if err != nil {
			return err
		}
		var total int64
		for state, c := range counts {
			fmt.Printf("%s\t%d\n", state, c)
			total += c
		}
		fmt.Printf("total\t%d\n", total)
		return nil
	}
	keys, err := loadgen.Keys(owners, seed)
	if err != nil {
		return err
	}
	network := identity.Mainnet
	if testnet {
		network = identity.Testnet
	}
	base := time.Now().Add(-age)
	start := time.Now()
	ts := make([]*tasks.Task, 0, batch)
	for lo := 0; lo < n; lo += batch {
		ts = ts[:0]
		for j := lo; j < min(lo+batch, n); j++ {
			ts = append(ts, loadgen.SeedTask(j, keys, network, base))
		}
		if err := s.Import(ctx, ts); err != nil {
			return fmt.Errorf("tasks %d…: %w", lo, err)
		}
	}
	fmt.Printf("seeded %d tasks (%d owners) in %v\n", n, owners, time.Since(start).Round(time.Millisecond))
	return nil
}
