package sandbox_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

var bombDirs = flag.Int("bomb-dirs", 100_000, "directories BenchmarkGrowingWrite creates before it measures")

// bomb creates n directories in sb through Stage and Promote, 1,000 a
// promotion (a folder and 999 folders in it), and returns how long that
// took.
func bomb(b *testing.B, sb *sandbox.Sandbox, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for top := 0; n > 0; top++ {
		parent := fmt.Sprintf("/sandbox/d%04d", top)
		changes := []sandbox.Change{sandbox.Mkdir{Path: parent}}
		for i := 1; i < min(n, 1000); i++ {
			changes = append(changes, sandbox.Mkdir{Path: fmt.Sprintf("%s/s%03d", parent, i)})
		}
		n -= len(changes)
		st, err := sb.Stage(ctx, changes)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Promote(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkGrowingWrite measures one growing write (Stage and Promote of
// a new 64-byte file) in an empty workspace and in one holding
// -bomb-dirs directories (100,000 by default) made through the sandbox,
// in the same run: with the running count, the second costs about what
// the first does. The metric walk-ms is one walk of the tree (timed
// once), the cost every growing write paid before the running count, and
// which one growing write a minute still pays (the count's maximum age)
// to pick up what changed from outside:
//
//	go test ./executor/sandbox/ -run '^$' -bench BenchmarkGrowingWrite -benchtime 2000x
func BenchmarkGrowingWrite(b *testing.B) {
	content := []byte("a line of a note, sixty-four bytes long, written again and again\n")[:64]
	for _, dirs := range []int{0, *bombDirs} {
		name := "empty"
		if dirs > 0 {
			name = fmt.Sprintf("%d-dirs", dirs)
		}
		b.Run(name, func(b *testing.B) {
			_, sb := newSandbox(b, sandbox.Limits{MaxChanges: 1000, MaxDuration: time.Hour}, nil)
			if dirs > 0 {
				took := bomb(b, sb, dirs)
				b.Logf("%d directories made through the sandbox in %v", dirs, took.Round(time.Millisecond))
			}
			ctx := context.Background()
			// One walk, as the first growing write makes; from then on
			// every promotion keeps the count.
			start := time.Now()
			c, err := sb.Counts(ctx)
			if err != nil {
				b.Fatal(err)
			}
			walk := time.Since(start)
			if c.Dirs != int64(dirs) {
				b.Fatalf("counted %d directories, made %d", c.Dirs, dirs)
			}
			i := 0
			for b.Loop() {
				st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: fmt.Sprintf("/sandbox/n%07d.txt", i), Content: content}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Promote(ctx, st); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(walk.Microseconds())/1000, "walk-ms")
		})
	}
}
