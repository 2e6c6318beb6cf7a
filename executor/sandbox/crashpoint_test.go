package sandbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// crashHooks installs on sb every failure point of a promotion or
// rollback, each counted by point; a point that panics stands for a
// crash there (SIGKILL: nothing is undone).
func crashHooks(sb *sandbox.Sandbox, set func(*sandbox.Sandbox), point func(what string)) {
	sandbox.SetTestHooks(sb, func(kind, path string) error {
		point("before " + kind + " " + path)
		return nil
	}, func(path string) error {
		point("before rename " + path)
		return nil
	})
	set(sb)
	sandbox.SetSwapHook(sb, func(step, path string) error {
		point(step + " " + path)
		return nil
	})
	sandbox.SetSyncHook(sb, func() error {
		point("sync")
		return nil
	})
	sandbox.SetLinkHook(sb, func(from, to string) { point("linked " + from + " " + to) })
}

// TestCrashAtEveryPoint stops a promotion, and a rollback, at each of its
// failure points in turn (a panic stands for the crash), then the Recover
// of the next start at each of its own: at the start after, Sweep then
// Recover always give back the tree as it was before the promotion, with
// no private file left.
func TestCrashAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	for _, action := range []string{"promote", "rollback"} {
		eachWay(t, action, func(t *testing.T, set func(*sandbox.Sandbox)) {
			t.Parallel()
			// run crashes action at its point crashAt (-1: never), then, at
			// the next start, crashes Recover at its point again (-1:
			// never), and recovers once more. It returns the points of the
			// action, and of the first Recover where the crash left a file
			// set aside (the rest of Recover is a rollback's transition).
			run := func(crashAt, again int) (points, recovering []string) {
				dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
				before := treeHash(t, dir)
				set(sb)
				st, err := sb.Stage(ctx, composite)
				if err != nil {
					t.Fatal(err)
				}
				snap := st.Snapshot()
				if action == "rollback" {
					if _, err := sb.Promote(ctx, st); err != nil {
						t.Fatal(err)
					}
				}
				// crashing runs f with hooks that crash at point k; it
				// returns the points met and whether it crashed. at says
				// what crashed before, if anything.
				crashing := func(sb *sandbox.Sandbox, k int, at string, f func() error) (points []string, crashed bool) {
					crashHooks(sb, set, func(what string) {
						points = append(points, what)
						if len(points)-1 == k {
							crashed = true
							panic(what)
						}
					})
					defer func() {
						if r := recover(); r != nil && !crashed {
							panic(r)
						}
					}()
					if err := f(); err != nil {
						t.Fatalf("%s%v", at, err)
					}
					return points, false
				}
				// restart is a crash and a new start: Open, Sweep.
				restart := func() {
					sb.Close()
					if sb, err = sandbox.Open(dir, sandbox.Limits{}); err != nil {
						t.Fatal(err)
					}
					set(sb)
					if _, err := sb.Sweep(ctx); err != nil {
						t.Fatal(err)
					}
				}
				defer func() { sb.Close() }()
				points, crashed := crashing(sb, crashAt, "", func() error {
					if action == "rollback" {
						return sb.Rollback(ctx, snap)
					}
					_, err := sb.Promote(ctx, st)
					return err
				})
				if !crashed {
					return points, nil
				}
				at := fmt.Sprintf("crash at %q (point %d)", points[crashAt], crashAt)
				restart()
				aside := reservedFiles(t, dir) != nil
				recovering, crashed = crashing(sb, again, at+": ", func() error { return sb.Recover(ctx, snap) })
				if crashed {
					at += fmt.Sprintf(", then in Recover at %q (point %d)", recovering[again], again)
					restart()
					if err := sb.Recover(ctx, snap); err != nil {
						t.Errorf("%s: Recover = %v", at, err)
						return points, recovering
					}
				}
				if treeHash(t, dir) != before {
					t.Errorf("%s: Recover did not restore the tree", at)
				}
				if left := reservedFiles(t, dir); left != nil {
					t.Errorf("%s: private files left: %v", at, left)
				}
				if !aside {
					recovering = nil
				}
				return points, recovering
			}
			clean, _ := run(-1, -1)
			for k := range clean {
				_, recovering := run(k, -1)
				for m := range recovering {
					run(k, m)
				}
			}
		})
	}
}
