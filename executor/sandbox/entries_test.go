package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestTotalEntries: the files and folders of the whole workspace are
// capped, as its bytes are: a staging or a promotion that would take them
// past MaxTotalEntries is a total_entries *LimitError and changes
// nothing, even when it adds no byte; one that adds no entry always may.
func TestTotalEntries(t *testing.T) {
	ctx := context.Background()
	// 3 entries: a.txt, d, d/b.txt.
	_, sb := newSandbox(t, sandbox.Limits{MaxTotalEntries: 5}, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	promote(t, sb, sandbox.Write{Path: "/sandbox/c.txt"}) // 4, no byte added

	wantRefused := func(err error, got int64) {
		t.Helper()
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalEntries || le.Max != 5 || le.Got != got {
			t.Fatalf("err = %v, want a total_entries LimitError (max 5, got %d)", err, got)
		}
	}
	_, err := sb.Stage(ctx, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/e"}, sandbox.Write{Path: "/sandbox/e/f.txt"}})
	wantRefused(err, 6)
	_, err = sb.Stage(ctx, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/g"}, sandbox.Mkdir{Path: "/sandbox/g/h"}, sandbox.Write{Path: "/sandbox/g/h/i.txt", Content: []byte("i")}})
	wantRefused(err, 7)

	// Two stagings each within the cap, not both: the second promotion
	// is refused, nothing of it applied.
	st1 := stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/x.txt"}})
	st2 := stage(t, sb, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/y"}})
	if _, err := sb.Promote(ctx, st1); err != nil {
		t.Fatal(err)
	}
	_, err = sb.Promote(ctx, st2)
	wantRefused(err, 6)
	c, err := sb.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (sandbox.Counts{Bytes: 2, Files: 4, Dirs: 1}); c != want {
		t.Fatalf("the workspace holds %+v, want %+v", c, want)
	}

	// At the cap: what adds no entry passes (a rename, a replacement,
	// a delete), and what a delete frees may be used again.
	promote(t, sb, sandbox.Rename{From: "/sandbox/x.txt", To: "/sandbox/d/x.txt"})
	promote(t, sb, sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("longer")})
	promote(t, sb, sandbox.Delete{Path: "/sandbox/c.txt"})
	promote(t, sb, sandbox.Mkdir{Path: "/sandbox/y"})
}

// TestTotalEntriesDefault: a sandbox opened without one has a cap of
// entries, and Narrow lowers it.
func TestTotalEntriesDefault(t *testing.T) {
	_, sb := newSandbox(t, sandbox.Limits{}, nil)
	if got, want := sb.Limits().MaxTotalEntries, sandbox.DefaultLimits().MaxTotalEntries; got != want || want <= 0 {
		t.Fatalf("MaxTotalEntries = %d, default %d", got, want)
	}
	if got := sb.Narrow(sandbox.Limits{MaxTotalEntries: 7}).Limits().MaxTotalEntries; got != 7 {
		t.Fatalf("narrowed to %d, want 7", got)
	}
	if _, err := sandbox.Open(t.TempDir(), sandbox.Limits{MaxTotalEntries: -1}); err == nil {
		t.Fatal("a negative cap of entries opened")
	}
}
