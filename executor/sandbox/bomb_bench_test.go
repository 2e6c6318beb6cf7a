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
// the first does. The log gives one walk of the tree (timed once), the
// cost every growing write paid before the running count. Each is
// measured with a fresh count (fresh) and with a count older than a
// minute at every write (stale): the sandbox once walked the tree again
// for such a count, inside the write's time limit, and no longer does
// (Recount picks up what changed from outside, away from the writes):
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
			_, sb := newSandbox(b, sandbox.Limits{MaxChanges: 1000, MaxDuration: time.Hour, MaxTotalEntries: 1 << 40}, nil)
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
			b.Logf("one walk of the tree: %v", walk.Round(time.Microsecond))
			for _, stale := range []bool{false, true} {
				name := "fresh"
				if stale {
					name = "stale"
				}
				b.Run(name, func(b *testing.B) {
					growingWrites(b, sb, content, stale)
				})
			}
		})
	}
}

// growingWrites promotes a new 64-byte file each iteration. With stale,
// the sandbox's clock moves on two minutes before each one, so that the
// running count is always older than a minute: a sandbox that walked
// the tree to refresh an old count would walk it at every write.
func growingWrites(b *testing.B, sb *sandbox.Sandbox, content []byte, stale bool) {
	ctx := context.Background()
	now := time.Now()
	sandbox.SetClock(sb, func() time.Time { return now })
	i := 0
	for b.Loop() {
		if stale {
			now = now.Add(2 * time.Minute)
		}
		st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: fmt.Sprintf("/sandbox/n%s%07d.txt", b.Name()[len(b.Name())-5:], i), Content: content}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Promote(ctx, st); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSharedCount measures a growing write (Stage and Promote of a
// new 64-byte file) with the count shared with the other processes
// opening the folder (CountFile read by Stage and Promote, read and
// written by the promotion, under the folder lock), and with the
// process's own count only, as where the folder is not locked: the cost
// of keeping the caps across processes.
//
//	go test ./executor/sandbox/ -run '^$' -bench BenchmarkSharedCount -benchtime 2000x -count 6
func BenchmarkSharedCount(b *testing.B) {
	if !sandbox.FolderLocks() {
		b.Skip("no folder lock here: nothing is shared")
	}
	content := []byte("a line of a note, sixty-four bytes long, written again and again\n")[:64]
	for _, shared := range []bool{false, true} {
		name := "own"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			_, sb := newSandbox(b, sandbox.Limits{}, nil)
			ctx := context.Background()
			if _, err := sb.Recount(ctx); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if !shared {
					sandbox.SetUnshared(sb) // each promotion finds the lock again
				}
				st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: fmt.Sprintf("/sandbox/n%07d.txt", i), Content: content}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Promote(ctx, st); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
