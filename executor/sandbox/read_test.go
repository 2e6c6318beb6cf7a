package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

func TestRead(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{MaxFileSize: 10}, map[string]string{
		"a.txt":      "hello",
		"edge.bin":   "0123456789",
		"big.txt":    "0123456789A",
		"sub/b.md":   "b",
		"empty.txt":  "",
		"directory/": "",
	})
	for _, tc := range []struct {
		path string
		want string
		err  error
	}{
		{"/sandbox/a.txt", "hello", nil},
		{"/sandbox/edge.bin", "0123456789", nil},
		{"/sandbox/sub/b.md", "b", nil},
		{"/sandbox/empty.txt", "", nil},
		{"/sandbox/big.txt", "", sandbox.ErrLimit},
		{"/sandbox/missing.txt", "", fs.ErrNotExist},
		{"/sandbox/missing/a.txt", "", fs.ErrNotExist},
		{"/sandbox/a.txt/x", "", sandbox.ErrNotDir},
		{"/sandbox/directory", "", sandbox.ErrNotRegular},
		{"/sandbox/", "", sandbox.ErrNotRegular},
		{"/sandbox/../a.txt", "", sandbox.ErrInvalidPath},
	} {
		got, err := sb.Read(ctx, tc.path)
		if tc.err == nil && (err != nil || string(got) != tc.want) {
			t.Errorf("Read(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
		if tc.err != nil && (!errors.Is(err, tc.err) || got != nil) {
			t.Errorf("Read(%s) = %q, %v; want %v", tc.path, got, err, tc.err)
		}
	}
	// Errors name the virtual path, never the host folder.
	_, err := sb.Read(ctx, "/sandbox/missing.txt")
	var oe *sandbox.OpError
	if !errors.As(err, &oe) || oe.Path != "/sandbox/missing.txt" || oe.Op != "read" {
		t.Fatalf("error %#v", err)
	}
	if s := err.Error(); strings.Contains(s, dir) {
		t.Fatalf("error %q shows the host folder", s)
	}
}

// TestStat: what a path is, without reading it; never through a link.
func TestStat(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{MaxFileSize: 1}, map[string]string{
		"a.txt":      "larger than the file size cap",
		"sub/b.md":   "b",
		"directory/": "",
	})
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "link")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	for _, tc := range []struct {
		path string
		want sandbox.Kind
		err  error
	}{
		{"/sandbox/", sandbox.KindDir, nil},
		{"/sandbox/a.txt", sandbox.KindFile, nil},
		{"/sandbox/sub/b.md", sandbox.KindFile, nil},
		{"/sandbox/directory", sandbox.KindDir, nil},
		{"/sandbox/missing.txt", sandbox.KindAbsent, nil},
		{"/sandbox/missing/a.txt", sandbox.KindAbsent, nil},
		{"/sandbox/a.txt/x", sandbox.KindAbsent, nil},
		{"/sandbox/link", "", sandbox.ErrSymlink},
		{"/sandbox/link/b.md", "", sandbox.ErrSymlink},
		{"/sandbox/../a.txt", "", sandbox.ErrInvalidPath},
	} {
		got, err := sb.Stat(ctx, tc.path)
		if got != tc.want || (tc.err == nil && err != nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("Stat(%s) = %q, %v; want %q, %v", tc.path, got, err, tc.want, tc.err)
		}
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{MaxEntries: 4}, map[string]string{
		"b.txt":    "bb",
		"a.md":     "a",
		"sub/":     "",
		"sub/x.md": "x",
	})
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	// A temporary file of the sandbox is not shown and not counted.
	if err := os.WriteFile(filepath.Join(dir, sandbox.ReservedPrefix+"tmp-left"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := sb.List(ctx, "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Entry{
		{Name: "a.md", Path: "/sandbox/a.md", Kind: "file", Size: 1},
		{Name: "b.txt", Path: "/sandbox/b.txt", Kind: "file", Size: 2},
		{Name: "link", Path: "/sandbox/link", Kind: "symlink"},
		{Name: "sub", Path: "/sandbox/sub", Kind: "dir"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %+v\nwant %+v", got, want)
	}
	if got, err := sb.List(ctx, "/sandbox/sub"); err != nil || len(got) != 1 || got[0].Path != "/sandbox/sub/x.md" {
		t.Fatalf("List(sub) = %+v, %v", got, err)
	}
	// One entry more than the cap fails as a whole.
	populate(t, dir, map[string]string{"c.txt": "c"})
	_, err = sb.List(ctx, "/sandbox/")
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != sandbox.LimitEntries || le.Max != 4 || le.Path != "/sandbox/" {
		t.Fatalf("List over the cap = %v", err)
	}
	for p, want := range map[string]error{
		"/sandbox/b.txt":   sandbox.ErrNotDir,
		"/sandbox/missing": fs.ErrNotExist,
		"/sandbox/link":    sandbox.ErrSymlink,
		"/sandbox":         sandbox.RuleNotInSandbox,
	} {
		if _, err := sb.List(ctx, p); !errors.Is(err, want) {
			t.Errorf("List(%s) = %v; want %v", p, err, want)
		}
	}
}

// TestListMany lists a directory larger than one read batch.
func TestListMany(t *testing.T) {
	files := map[string]string{}
	for i := range 700 {
		files[fmt.Sprintf("f%04d.txt", i)] = ""
	}
	_, sb := newSandbox(t, sandbox.Limits{MaxEntries: 700}, files)
	got, err := sb.List(context.Background(), "/sandbox/")
	if err != nil || len(got) != 700 || got[0].Name != "f0000.txt" || got[699].Name != "f0699.txt" {
		t.Fatalf("List = %d entries, %v", len(got), err)
	}
	_, err = sb.Narrow(sandbox.Limits{MaxEntries: 699}).List(context.Background(), "/sandbox/")
	if !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("List of 700 with a cap of 699 = %v", err)
	}
}

// TestListFirst: the first n entries by name, as List shows them, and how
// many others there are, whatever the folder's size: MaxEntries, which
// refuses List, does not refuse it; temporary files are neither shown
// nor counted.
func TestListFirst(t *testing.T) {
	files := map[string]string{"sub/": "", "sub/x.md": "x"}
	for i := range 700 {
		files[fmt.Sprintf("f%04d.txt", 699-i)] = strings.Repeat("z", i%3)
	}
	dir, sb := newSandbox(t, sandbox.Limits{MaxEntries: 100}, files)
	if err := os.WriteFile(filepath.Join(dir, sandbox.ReservedPrefix+"tmp-left"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sb.List(ctx, "/sandbox/"); !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("List of 701 entries with a cap of 100 = %v; want ErrLimit", err)
	}
	wide, err := sandbox.Open(dir, sandbox.Limits{MaxEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	all, err := wide.List(ctx, "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n        int
		wantLen  int
		wantMore int
	}{{1, 1, 700}, {50, 50, 651}, {701, 701, 0}, {5000, 701, 0}} {
		got, more, err := sb.ListFirst(ctx, "/sandbox/", c.n)
		if err != nil || len(got) != c.wantLen || more != c.wantMore {
			t.Fatalf("ListFirst(%d) = %d entries, %d more, %v; want %d, %d more", c.n, len(got), more, err, c.wantLen, c.wantMore)
		}
		if !slices.Equal(got, all[:c.wantLen]) {
			t.Errorf("ListFirst(%d) = %v…; want List's first %d", c.n, got[:min(3, len(got))], c.wantLen)
		}
	}
	if _, _, err := sb.ListFirst(ctx, "/sandbox/", 0); err == nil {
		t.Error("ListFirst of 0 entries succeeded")
	}
	if _, _, err := sb.ListFirst(ctx, "/sandbox/../etc", 3); err == nil {
		t.Error("ListFirst outside the sandbox succeeded")
	}
}
