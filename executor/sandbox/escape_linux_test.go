package sandbox_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/snapnode/snapnode/executor/sandbox"
)

type escapeCase struct {
	Name string `json:"name"`
	Op   string `json:"op"`
	Path string `json:"path"`
	To   string `json:"to"`
	Hex  bool   `json:"hex"`
	Want string `json:"want"`
}

// wantErr maps the names used in testdata/escape.json to what the error
// must match.
func wantErr(name string) error {
	switch name {
	case "symlink":
		return sandbox.ErrSymlink
	case "hardlink":
		return sandbox.ErrHardLink
	case "not_regular":
		return sandbox.ErrNotRegular
	case "not_dir":
		return sandbox.ErrNotDir
	case "exists":
		return sandbox.ErrExists
	case "not_text":
		return sandbox.ErrNotText
	case "not_exist":
		return fs.ErrNotExist
	}
	return sandbox.Rule(name)
}

// escapeWorld is a temporary folder holding the sandbox, a canary tree
// beside it, and the fixtures of the escape suite inside the sandbox.
type escapeWorld struct {
	base, dir string
	canary    *canary
	sb        *sandbox.Sandbox
}

func newEscapeWorld(t *testing.T) *escapeWorld {
	t.Helper()
	base := t.TempDir()
	w := &escapeWorld{base: base, dir: filepath.Join(base, "sandbox")}
	w.canary = plantCanary(t, filepath.Join(base, "canary"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string) string { return filepath.Join(w.dir, name) }
	must(os.MkdirAll(in("real"), 0o755))
	must(os.MkdirAll(in("nest"), 0o755))
	must(os.MkdirAll(in("hardsub"), 0o755))
	must(os.WriteFile(in("ok.txt"), []byte("ok\n"), 0o644))
	must(os.WriteFile(in("real/r.txt"), []byte("real\n"), 0o644))
	must(os.WriteFile(in("program.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(in("upper.TXT"), []byte("upper\n"), 0o644))
	must(os.Symlink("real", in("in")))
	must(os.Symlink("../canary", in("out")))
	must(os.Symlink(w.canary.dir, in("outabs")))
	must(os.Symlink(filepath.Join(w.canary.dir, "secret.txt"), in("link.txt")))
	must(os.Symlink("../canary/secret.txt", in("rlink.txt")))
	must(os.Symlink(filepath.Join(w.canary.dir, "new.txt"), in("dangling.txt")))
	must(os.Symlink(filepath.Join(w.canary.dir, "newdir"), in("danglingdir")))
	must(os.Symlink("../../canary", in("nest/up")))
	must(os.Link(filepath.Join(w.canary.dir, "secret.txt"), in("hard.txt")))
	must(os.Link(filepath.Join(w.canary.dir, "sub/deep.md"), in("hardsub/h.md")))
	must(syscall.Mkfifo(in("fifo"), 0o644))
	sb, err := sandbox.Open(w.dir, sandbox.Limits{})
	must(err)
	t.Cleanup(func() { sb.Close() })
	w.sb = sb
	return w
}

// siblings lists the folder holding the sandbox and the canary.
func (w *escapeWorld) siblings(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(w.base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// run performs one operation the way the executor would: reads and lists
// directly, changes through Stage and then Promote. It returns everything
// the sandbox handed back, as text, and the error.
func (w *escapeWorld) run(ctx context.Context, op, path, to string) (string, error) {
	var out strings.Builder
	var change sandbox.Change
	switch op {
	case "read":
		b, err := w.sb.Read(ctx, path)
		out.Write(b)
		return out.String(), err
	case "list":
		ents, err := w.sb.List(ctx, path)
		js, _ := json.Marshal(ents)
		out.Write(js)
		return out.String(), err
	case "write":
		change = sandbox.Write{Path: path, Content: []byte("ESCAPED\n")}
	case "mkdir":
		change = sandbox.Mkdir{Path: path}
	case "delete":
		change = sandbox.Delete{Path: path}
	case "rename":
		change = sandbox.Rename{From: path, To: to}
	default:
		return "", fmt.Errorf("unknown op %q", op)
	}
	st, err := w.sb.Stage(ctx, []sandbox.Change{change})
	if err != nil {
		return "", err
	}
	js, _ := json.Marshal(st.Diffs())
	out.Write(js)
	snap, err := w.sb.Promote(ctx, st)
	js, _ = json.Marshal(snap)
	out.Write(js)
	return out.String(), err
}

// TestEscapeSuite runs every attempt of testdata/escape.json against a
// sandbox with a canary tree beside it. Each attempt must fail with the
// expected rule or error; afterwards the canary must be unchanged and
// unread, and the sandbox's own files as they were.
func TestEscapeSuite(t *testing.T) {
	raw, err := os.ReadFile("testdata/escape.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []escapeCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("escape suite has %d attempts, want at least 40", len(cases))
	}
	w := newEscapeWorld(t)
	insideBefore := treeHash(t, w.dir)
	siblingsBefore := w.siblings(t)
	w.canary.arm(t)

	ctx := context.Background()
	var returned []string
	for _, c := range cases {
		path := strings.ReplaceAll(c.Path, "{canary}", w.canary.dir)
		to := strings.ReplaceAll(c.To, "{canary}", w.canary.dir)
		if c.Hex {
			b, err := hex.DecodeString(c.Path)
			if err != nil {
				t.Fatal(err)
			}
			path = string(b)
		}
		got, err := w.run(ctx, c.Op, path, to)
		returned = append(returned, got)
		if err == nil {
			t.Errorf("%s: %s %+q succeeded", c.Name, c.Op, path)
			continue
		}
		returned = append(returned, err.Error())
		if want := wantErr(c.Want); !errors.Is(err, want) {
			t.Errorf("%s: %s %+q: %v; want %v", c.Name, c.Op, path, err, want)
		}
	}

	w.canary.check(t)
	for i, r := range returned {
		if m := w.canary.leaked([]byte(r)); m != "" {
			t.Errorf("canary content %s returned: %q", m, returned[i])
		}
	}
	if after := treeHash(t, w.dir); after != insideBefore {
		t.Errorf("the sandbox itself changed under attempts that all had to fail")
	}
	if got := w.siblings(t); !slices.Equal(got, siblingsBefore) {
		t.Errorf("beside the sandbox: %v, was %v", got, siblingsBefore)
	}
}

// TestEscapeSwapRace swaps a directory of the sandbox with a symbolic link
// to the canary thousands of times while writes, reads and listings run
// through it. Operations may fail or land in the real directory; none may
// land in, read from or list the canary.
func TestEscapeSwapRace(t *testing.T) {
	w := newEscapeWorld(t)
	in := func(name string) string { return filepath.Join(w.dir, name) }
	// "d" is a real directory and "other" a symbolic link to the canary;
	// the swapper exchanges the two names atomically (renameat2
	// RENAME_EXCHANGE), so "d" is always one or the other, never absent.
	if err := os.Mkdir(in("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The real directory has a secret.txt of its own, so reads may succeed.
	if err := os.WriteFile(in("d/secret.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../canary", in("other")); err != nil {
		t.Fatal(err)
	}
	if err := exchange(in("d"), in("other")); err != nil {
		t.Skipf("no atomic exchange here: %v", err)
	}
	if err := exchange(in("d"), in("other")); err != nil {
		t.Fatal(err)
	}
	w.canary.arm(t)

	const minSwaps = 2000
	// Pacing, without timing: the swapper swaps again once some operation
	// has ended (the other workers are then in the middle of theirs), and
	// a worker starts an operation only after a swap made since it began
	// its previous one. So the swaps fall inside operations, and each state
	// of "d" is met by operations.
	var (
		ops     atomic.Int64
		opDone  = make(chan struct{}, 1)
		stop    = make(chan struct{})
		genMu   sync.Mutex
		genCond = sync.NewCond(&genMu)
		swaps   int64 // guarded by genMu
	)
	swapCount := func() int64 {
		genMu.Lock()
		defer genMu.Unlock()
		return swaps
	}
	swapErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // until the workers stop; ends with "d" real again
		defer wg.Done()
		for {
			if err := exchange(in("d"), in("other")); err != nil {
				swapErr <- err
				genMu.Lock()
				swaps = -1 << 40 // unblock and stop the workers
				genCond.Broadcast()
				genMu.Unlock()
				return
			}
			genMu.Lock()
			swaps++
			n := swaps
			genCond.Broadcast()
			genMu.Unlock()
			select {
			case <-opDone:
			case <-stop:
				if n%2 != 0 {
					if err := exchange(in("d"), in("other")); err != nil {
						swapErr <- err
					}
				}
				return
			}
		}
	}()

	ctx := context.Background()
	var mu sync.Mutex
	var returned []string
	var landed []string
	const workers = 3
	var workerWG sync.WaitGroup
	for g := range workers {
		workerWG.Add(1)
		go func() {
			defer workerWG.Done()
			var began int64
			for i := 0; ; i++ {
				genMu.Lock()
				for swaps == began && i > 0 {
					genCond.Wait()
				}
				began = swaps
				genMu.Unlock()
				if began >= minSwaps || began < 0 {
					return
				}
				var got string
				var err error
				switch i % 3 {
				case 0:
					name := fmt.Sprintf("/sandbox/d/w%d-%d.txt", g, i)
					got, err = w.run(ctx, "write", name, "")
					if err == nil {
						mu.Lock()
						landed = append(landed, name)
						mu.Unlock()
					}
				case 1:
					got, err = w.run(ctx, "read", "/sandbox/d/secret.txt", "")
				case 2:
					got, err = w.run(ctx, "list", "/sandbox/d", "")
				}
				mu.Lock()
				returned = append(returned, got)
				if err != nil {
					returned = append(returned, err.Error())
				}
				mu.Unlock()
				ops.Add(1)
				select {
				case opDone <- struct{}{}:
				default:
				}
			}
		}()
	}
	workerWG.Wait()
	close(stop)
	wg.Wait()
	select {
	case err := <-swapErr:
		t.Fatalf("swapper: %v", err)
	default:
	}
	if n := swapCount(); n < minSwaps {
		t.Fatalf("only %d swaps", n)
	}
	t.Logf("%d swaps, %d operations, %d writes landed", swapCount(), ops.Load(), len(landed))

	w.canary.check(t)
	for _, r := range returned {
		if m := w.canary.leaked([]byte(r)); m != "" {
			t.Fatalf("canary content %s returned: %q", m, r)
		}
	}
	// Every write that succeeded is in the real directory.
	for _, name := range landed {
		b, err := os.ReadFile(filepath.Join(w.dir, "d", filepath.Base(name)))
		if err != nil || string(b) != "ESCAPED\n" {
			t.Errorf("write %s reported done but is not in the real directory: %v", name, err)
		}
	}
}

// exchange swaps two names atomically with renameat2(RENAME_EXCHANGE).
func exchange(a, b string) error {
	nr, ok := map[string]uintptr{"amd64": 316, "arm64": 276, "riscv64": 276, "loong64": 276}[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("renameat2 number unknown on %s", runtime.GOARCH)
	}
	pa, err := syscall.BytePtrFromString(a)
	if err != nil {
		return err
	}
	pb, err := syscall.BytePtrFromString(b)
	if err != nil {
		return err
	}
	const atFDCWD, renameExchange = -100, 2
	fd := atFDCWD
	_, _, errno := syscall.Syscall6(nr, uintptr(fd), uintptr(unsafe.Pointer(pa)), uintptr(fd), uintptr(unsafe.Pointer(pb)), renameExchange, 0)
	if errno != 0 {
		return &os.LinkError{Op: "renameat2", Old: a, New: b, Err: errno}
	}
	return nil
}
