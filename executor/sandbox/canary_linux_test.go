package sandbox_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// canary is a tree outside the sandbox that no operation may read or
// change. What proves "not read": an inotify watch on every directory and
// every file of the tree (file watches are on the inode, so an open through
// a hard link from inside the sandbox is seen too) reports any open, read,
// write, attribute change, create, delete or move while it is armed; the
// access times, set into the past so that even relatime would move them on
// a read, must not move; and no byte of canary content may appear in
// anything the sandbox returned. Mode 0000 would prove nothing here: the
// tests run as root, which ignores it. Hashes of the whole tree (names,
// kinds, modes, contents) before and after prove "unchanged".
type canary struct {
	dir     string
	markers []string
	before  string
	stamps  map[string]time.Time
	fd      int
	watches map[int32]string
}

func plantCanary(t *testing.T, dir string) *canary {
	t.Helper()
	c := &canary{dir: dir}
	files := map[string]string{
		"secret.txt":       "secret",
		"passwd":           "root:x:0:0",
		"sub/deep.md":      "deep",
		"sub/inner/data.b": "binary",
	}
	for name, what := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var r [16]byte
		rand.Read(r[:])
		marker := "CANARY-" + what + "-" + hex.EncodeToString(r[:])
		c.markers = append(c.markers, marker)
		if err := os.WriteFile(p, []byte(marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// arm records the tree, pushes every access time into the past and starts
// watching. Call it once every fixture (links into the canary included) is
// in place.
func (c *canary) arm(t *testing.T) {
	t.Helper()
	c.before = treeHash(t, c.dir)
	past := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	c.stamps = make(map[string]time.Time)
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	c.fd, c.watches = fd, make(map[int32]string)
	const mask = syscall.IN_ACCESS | syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE |
		syscall.IN_CLOSE_NOWRITE | syscall.IN_OPEN | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
		syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
	// Collect first, then set the times: reading a directory moves its
	// access time, so the walk must be over before the first Chtimes.
	var paths []string
	err = filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, past, fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		c.stamps[p] = past
	}
	// Watches go on after the last Chtimes, so that none of the set-up
	// shows as an event.
	for p := range c.stamps {
		wd, err := syscall.InotifyAddWatch(fd, p, mask)
		if err != nil {
			t.Fatalf("inotify watch %s: %v", p, err)
		}
		c.watches[int32(wd)] = p
	}
	t.Cleanup(func() { syscall.Close(fd) })
}

// check fails the test for every problem that problems finds.
func (c *canary) check(t *testing.T) {
	t.Helper()
	for _, p := range c.problems(t) {
		t.Error(p)
	}
}

// problems returns every event seen while armed, every moved access time,
// and any change of the tree. Call it after the sandbox operations; it
// stops the watch before it reads the tree itself.
func (c *canary) problems(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range c.events(t) {
		out = append(out, "canary touched: "+e)
	}
	syscall.Close(c.fd)
	for p, want := range c.stamps {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if got := time.Unix(st.Atim.Unix()); !got.Equal(want) {
			out = append(out, fmt.Sprintf("canary %s: access time moved from %v to %v", p, want, got))
		}
	}
	if after := treeHash(t, c.dir); after != c.before {
		out = append(out, fmt.Sprintf("canary tree changed:\nbefore %s\nafter  %s", c.before, after))
	}
	return out
}

func (c *canary) events(t *testing.T) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(c.fd, buf)
		if err == syscall.EAGAIN || n == 0 {
			return out
		}
		if err != nil {
			t.Fatalf("inotify read: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			out = append(out, fmt.Sprintf("%s %q mask %#x", c.watches[ev.Wd], name, ev.Mask))
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// leaked reports whether any canary content appears in b.
func (c *canary) leaked(b []byte) string {
	for _, m := range c.markers {
		if bytes.Contains(b, []byte(m)) {
			return m
		}
	}
	return ""
}

// TestCanaryDetects shows that the canary sees what the escape tests claim
// does not happen: each of these accesses, done directly, is reported.
func TestCanaryDetects(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(c *canary, link string) error
	}{
		{"read through a hard link elsewhere", func(c *canary, link string) error {
			_, err := os.ReadFile(link)
			return err
		}},
		{"open without reading", func(c *canary, link string) error {
			f, err := os.Open(filepath.Join(c.dir, "passwd"))
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"list a directory", func(c *canary, link string) error {
			_, err := os.ReadDir(filepath.Join(c.dir, "sub"))
			return err
		}},
		{"create a file", func(c *canary, link string) error {
			return os.WriteFile(filepath.Join(c.dir, "sub/new.txt"), nil, 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			c := plantCanary(t, filepath.Join(base, "canary"))
			link := filepath.Join(base, "alias.txt")
			if err := os.Link(filepath.Join(c.dir, "secret.txt"), link); err != nil {
				t.Fatal(err)
			}
			c.arm(t)
			if err := tc.do(c, link); err != nil {
				t.Fatal(err)
			}
			if p := c.problems(t); len(p) == 0 {
				t.Fatal("the canary saw nothing")
			} else {
				t.Logf("seen: %q", p)
			}
		})
	}
}
