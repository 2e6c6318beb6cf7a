package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// openAgain opens a second sandbox on dir, as another process (a replica
// of the node sharing its workspace) would.
func openAgain(t *testing.T, dir string, lim sandbox.Limits) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// wantLimit fails unless err is a *LimitError of limit with Got got.
func wantLimit(t *testing.T, err error, limit sandbox.Limit, got int64) {
	t.Helper()
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != limit || le.Got != got {
		t.Fatalf("err = %v, want a %s LimitError (got %d)", err, limit, got)
	}
}

// TestTotalCapsAcrossProcesses: two sandboxes open on one folder, as two
// replicas of a node sharing their workspace, each with a count of its
// own. What one promotes counts in the other's check at once, not at its
// next Recount: together they never take the workspace past
// MaxTotalBytes or MaxTotalEntries, and what one removes frees room for
// the other.
func TestTotalCapsAcrossProcesses(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100, MaxTotalEntries: 5}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 50))})
	b := openAgain(t, dir, lim)
	for _, sb := range []*sandbox.Sandbox{a, b} {
		if c, err := sb.Recount(ctx); err != nil || c.Bytes != 50 {
			t.Fatalf("Recount = %+v, %v", c, err)
		}
	}

	// Each stages 40 bytes while the other has not promoted: both fit.
	stA := stage(t, a, []sandbox.Change{sandbox.Write{Path: "/sandbox/x.txt", Content: make([]byte, 40)}})
	stB := stage(t, b, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 40)}})
	if _, err := a.Promote(ctx, stA); err != nil {
		t.Fatal(err)
	}
	_, err := b.Promote(ctx, stB)
	wantLimit(t, err, sandbox.LimitTotalBytes, 130)
	// And a staging after it is refused too.
	_, err = b.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 40)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 130)

	// Entries: 2 now (a.txt, x.txt), cap 5.
	promote(t, a, sandbox.Mkdir{Path: "/sandbox/d"}, sandbox.Mkdir{Path: "/sandbox/d/e"}) // 4
	_, err = b.Stage(ctx, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/f"}, sandbox.Mkdir{Path: "/sandbox/g"}})
	wantLimit(t, err, sandbox.LimitTotalEntries, 6)

	// a removes x.txt: b may write its 40 bytes at once.
	promote(t, a, sandbox.Delete{Path: "/sandbox/x.txt"})
	promote(t, b, sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 40)})
	for _, sb := range []*sandbox.Sandbox{a, b} {
		walked, err := sb.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := sandbox.Counts{Bytes: 90, Files: 2, Dirs: 2}
		if walked != want {
			t.Fatalf("the tree holds %+v, want %+v", walked, want)
		}
	}
}

// TestTotalCapsAcrossProcessesConcurrent: replicas promoting at once, each
// a file that fits alone, never pass the cap together.
func TestTotalCapsAcrossProcessesConcurrent(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, first := newSandbox(t, lim, nil)
	sbs := []*sandbox.Sandbox{first}
	for range 3 {
		sbs = append(sbs, openAgain(t, dir, lim))
	}
	for _, sb := range sbs {
		if _, err := sb.Recount(ctx); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4*10)
	for i, sb := range sbs {
		go func() {
			for j := range 10 {
				st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: fmt.Sprintf("/sandbox/f%d-%d.txt", i, j), Content: make([]byte, 10)}})
				if err == nil {
					_, err = sb.Promote(ctx, st)
				}
				errs <- err
			}
		}()
	}
	refused := 0
	for range 4 * 10 {
		if err := <-errs; err != nil {
			var le *sandbox.LimitError
			if !errors.As(err, &le) {
				t.Fatal(err)
			}
			refused++
		}
	}
	c, err := first.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bytes != 100 || refused != 30 {
		t.Fatalf("the workspace holds %d bytes (cap 100), %d writes refused (want 30)", c.Bytes, refused)
	}
}

// TestRecountDuringAnotherProcessPromotion: a Recount in one process
// during whose walk another process promotes a file the walk already
// passed counts that file: the count kept is never below the workspace.
func TestRecountDuringAnotherProcessPromotion(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, map[string]string{"a/1.txt": "1", "z/2.txt": "2"})
	b := openAgain(t, dir, sandbox.Limits{})
	if _, err := b.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	// The walk's order is the directories': b writes into whichever of
	// a and z the walk came to first, once it comes to the other.
	first, done := "", false
	sandbox.SetWalkHook(a, func(path string) {
		if path != "/sandbox/a" && path != "/sandbox/z" {
			return
		}
		if first == "" {
			first = path
			return
		}
		if !done {
			done = true
			promote(t, b, sandbox.Write{Path: first + "/new.txt", Content: []byte("abc")})
		}
	})
	if _, err := a.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	sandbox.SetWalkHook(a, nil)
	if !done {
		t.Fatal("the walk never came to both folders")
	}
	want := sandbox.Counts{Bytes: 5, Files: 3, Dirs: 2}
	for name, sb := range map[string]*sandbox.Sandbox{"a": a, "b": b} {
		if c, err := sandbox.SharedCounts(sb); err != nil || c.Bytes < want.Bytes || c.Files < want.Files || c.Dirs < want.Dirs {
			t.Fatalf("%s: the count is %+v, %v; the workspace holds %+v", name, c, err, want)
		}
	}
}

// TestCountFileMissingOrCorrupt: a count file removed, or holding
// anything but a count, makes the next check count the workspace again,
// and write it anew; Sweep and List leave it alone.
func TestCountFileMissingOrCorrupt(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 50))})
	b := openAgain(t, dir, lim)
	promote(t, a, sandbox.Write{Path: "/sandbox/x.txt", Content: make([]byte, 10)})
	name := filepath.Join(dir, sandbox.CountFile)
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("no count file after a promotion: %v", err)
	}
	if n, err := b.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	entries, err := b.List(ctx, "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Path == "/sandbox/"+sandbox.CountFile {
			t.Fatal("List shows the count file")
		}
	}
	for _, bad := range []string{"", "{", `{"bytes":-5,"files":1,"dirs":0,"id":"x"}`, "not a count at all"} {
		if err := os.WriteFile(name, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		// An operator's 30 bytes meanwhile: the recount sees them.
		if err := os.WriteFile(filepath.Join(dir, "op.txt"), make([]byte, 30), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := b.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
		wantLimit(t, err, sandbox.LimitTotalBytes, 110)
		if err := os.Remove(filepath.Join(dir, "op.txt")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Recount(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "op.txt"), make([]byte, 30), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = b.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)
}

// TestCountFileHostileFigures: a count file that parses, with a valid ID,
// but whose figures no count of the node can hold (negative, or so large
// that adding a change wraps around), is taken as no count: the
// workspace is counted again, and the caps are never looser than that
// fresh count.
func TestCountFileHostileFigures(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100, MaxTotalEntries: 10}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 90))})
	if _, err := a.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	const id = `"id":"00112233445566778899aabbccddeeff"`
	const huge = "9223372036854775807"
	for _, bad := range []string{
		`{"bytes":-1000,"files":0,"dirs":0,"known":true,"grown":{},` + id + `}`,
		`{"bytes":0,"files":-1000,"dirs":0,"known":true,"grown":{},` + id + `}`,
		`{"bytes":0,"files":0,"dirs":-1000,"known":true,"grown":{},` + id + `}`,
		`{"bytes":` + huge + `,"files":0,"dirs":0,"known":true,"grown":{},` + id + `}`,
		`{"bytes":0,"files":` + huge + `,"dirs":0,"known":true,"grown":{},` + id + `}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, sandbox.CountFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalBytes || le.Got != 110 {
			t.Errorf("count file %s: Stage of 20 bytes into 90 of 100: %v; want a total_bytes LimitError (got 110)", bad, err)
		}
		if c, err := sandbox.SharedCounts(a); err != nil || c != (sandbox.Counts{Bytes: 90, Files: 1}) {
			t.Errorf("count file %s: shared count then %+v, %v; want the workspace's, 90 bytes in 1 file", bad, c, err)
		}
	}
}

// TestCountFileTooSmall: a count file whose figure is below what a
// removal takes away (an operator's edit by hand) is not kept negative:
// the next check counts the workspace again.
func TestCountFileTooSmall(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 60)), "b.txt": string(make([]byte, 30))})
	if _, err := a.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	rec := `{"bytes":10,"files":2,"dirs":0,"known":true,"grown":{},"id":"00112233445566778899aabbccddeeff"}`
	if err := os.WriteFile(filepath.Join(dir, sandbox.CountFile), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	promote(t, a, sandbox.Delete{Path: "/sandbox/a.txt"})
	b, err := os.ReadFile(filepath.Join(dir, sandbox.CountFile))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Bytes, Files, Dirs int64 }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Bytes < 0 || got.Files < 0 || got.Dirs < 0 {
		t.Errorf("count file after the removal: %s; want no negative figure", b)
	}
	_, err = a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 80)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)
}

// TestCountFileLinkNotFollowed: a symbolic link at the count file's name
// (made from outside: the sandbox makes none) is no count, even when it
// names a file of the workspace holding a well-formed record, which a
// requester could write: the sandbox follows no link.
func TestCountFileLinkNotFollowed(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 200}
	rec := `{"bytes":0,"files":0,"dirs":0,"known":true,"grown":{},"id":"00112233445566778899aabbccddeeff"}`
	dir, a := newSandbox(t, lim, map[string]string{"notes.txt": rec, "a.txt": string(make([]byte, 180-len(rec)))})
	name := filepath.Join(dir, sandbox.CountFile)
	os.Remove(name)
	if err := os.Symlink("notes.txt", name); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if c, err := sandbox.SharedCounts(a); err == nil {
		t.Errorf("shared count read through a link: %+v", c)
	}
	_, err := a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 30)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 210)
}

// TestCountTempLeftByCrash: a stop between the write of the count's
// temporary file and its rename leaves that file: it is never listed,
// never counted, never read as the count, and the next write of the
// count replaces it.
func TestCountTempLeftByCrash(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 50))})
	temp := filepath.Join(dir, sandbox.CountFile+"-new")
	rec := `{"bytes":0,"files":0,"dirs":0,"known":true,"grown":{},"id":"00112233445566778899aabbccddeeff"}`
	if err := os.WriteFile(temp, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, sandbox.CountFile))
	if c, err := a.Recount(ctx); err != nil || c != (sandbox.Counts{Bytes: 50, Files: 1}) {
		t.Fatalf("Recount = %+v, %v; want 50 bytes in 1 file", c, err)
	}
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file left is still there after a write of the count: %v", err)
	}
	if err := os.WriteFile(temp, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	ents, err := a.List(ctx, "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Path == "/sandbox/"+filepath.Base(temp) {
			t.Error("List shows the count's temporary file")
		}
	}
	if c, err := a.Counts(ctx); err != nil || c != (sandbox.Counts{Bytes: 50, Files: 1}) {
		t.Errorf("Counts = %+v, %v; want 50 bytes in 1 file", c, err)
	}
	_, err = a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 60)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)
	promote(t, a, sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 10)})
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file left is still there after a promotion: %v", err)
	}
	if c, err := sandbox.SharedCounts(a); err != nil || c != (sandbox.Counts{Bytes: 60, Files: 2}) {
		t.Errorf("shared count %+v, %v; want 60 bytes in 2 files", c, err)
	}
}

// TestCountFileOversize: what is read of the count file is bounded: a
// well-formed record padded past the bound, or a huge sparse file, is no
// count, and the workspace is counted again.
func TestCountFileOversize(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, a := newSandbox(t, lim, map[string]string{"a.txt": string(make([]byte, 90))})
	name := filepath.Join(dir, sandbox.CountFile)
	rec := `{"bytes":0,"files":0,"dirs":0,"known":true,"grown":{},"id":"00112233445566778899aabbccddeeff"}`
	padded := rec + string(bytes.Repeat([]byte(" "), 5000))
	if err := os.WriteFile(name, []byte(padded), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)

	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		f.Close()
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	_, err = a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)
}

// TestRecountGrownNeverShrinks: Grown only adds up, so what it gained
// during a walk is never negative: a count file rewritten during the
// walk with the same ID and a smaller Grown (an edit by hand) does not
// take the count kept below what the walk found.
func TestRecountGrownNeverShrinks(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock here: the caps hold per process only")
	}
	ctx := context.Background()
	lim := sandbox.Limits{MaxTotalBytes: 100}
	dir, a := newSandbox(t, lim, map[string]string{"a/1.txt": string(make([]byte, 90))})
	name := filepath.Join(dir, sandbox.CountFile)
	const id = `"id":"00112233445566778899aabbccddeeff"`
	write := func(grown string) {
		rec := `{"bytes":90,"files":1,"dirs":1,"known":true,"grown":` + grown + `,` + id + `}`
		if err := os.WriteFile(name, []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"bytes":40,"files":0,"dirs":0}`)
	done := false
	sandbox.SetWalkHook(a, func(path string) {
		if !done {
			done = true
			write(`{"bytes":0,"files":0,"dirs":0}`)
		}
	})
	if _, err := a.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	sandbox.SetWalkHook(a, nil)
	if !done {
		t.Fatal("the walk never ran its hook")
	}
	if c, err := sandbox.SharedCounts(a); err != nil || c.Bytes < 90 {
		t.Errorf("count kept %+v, %v; the workspace holds 90 bytes", c, err)
	}
	_, err := a.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/y.txt", Content: make([]byte, 20)}})
	wantLimit(t, err, sandbox.LimitTotalBytes, 110)
}
