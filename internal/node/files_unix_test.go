//go:build unix

package node_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testutil"
)

// databaseFiles returns the SQLite files in dir and their permissions.
func databaseFiles(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	files := map[string]fs.FileMode{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".db") || strings.HasSuffix(n, ".db-wal") || strings.HasSuffix(n, ".db-shm") || strings.HasSuffix(n, ".db-journal") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			files[n] = fi.Mode().Perm()
		}
	}
	return files
}

// checkPrivate fails unless dir is 0700 and each database file in it, WAL
// and shared memory included, 0600; it returns the files.
func checkPrivate(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data folder %04o, want 0700", perm)
	}
	files := databaseFiles(t, dir)
	for _, want := range []string{"tasks.db", "tasks.db-wal", "tasks.db-shm", "relay.db", "relay.db-wal"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s in the data folder: %v", want, files)
		}
	}
	for name, perm := range files {
		if perm != 0o600 {
			t.Errorf("%s: %04o, want 0600", name, perm)
		}
	}
	return files
}

// The data folder is 0700 and every database file 0600, WAL and shared
// memory included, under the common umask 022; a folder and files found
// wider (copied, restored) are narrowed at start, each with a warning.
func TestDataFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "data")
	at := func(c *config.Config) { c.DataDir = dir }

	n, stop := startNode(t, at)
	r := newRequester(t, n.RelayURLs()) // writes to every database
	r.call(t, n, "message/send", text("hello"), false)
	files := checkPrivate(t, dir)
	stop()
	if _, ok := files["node.db"]; ok {
		t.Error("node.db made: the inbox checkpoint belongs in the task database")
	}

	// Made readable by all, as a copy or a restore would leave them; a
	// WAL left beside each database, as after a crash.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		os.Chmod(filepath.Join(dir, name), 0o644)
	}
	for _, db := range []string{"tasks.db", "relay.db"} {
		f, err := os.OpenFile(filepath.Join(dir, db+"-wal"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var logs testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dir, "127.0.0.1:0", ""
	ctx, cancel := context.WithCancel(context.Background())
	n2, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n2.Wait() })
	newRequester(t, n2.RelayURLs()).call(t, n2, "message/send", text("again"), false)
	checkPrivate(t, dir)
	for _, want := range []string{"data folder was open to other users", "data/tasks.db-wal\n", "data/relay.db\n"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %q in:\n%s", want, logs.String())
		}
	}
}

// A data folder of another user is refused before anything is written in
// it, naming the folder, the setting and the rule: its owner could open it
// again at any time (and reach the admin socket, replace the key or the
// databases), whatever mode the node sets. (Another user is simulated: the
// node is told it runs as a uid that does not own the folder.)
func TestDataFolderOfAnotherUserRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dir, "127.0.0.1:0", ""
	startRefusedWith(t, cfg, []node.Option{node.WithProcessUID(os.Geteuid() + 4242)}, "in a data folder of another user", dir, "data_dir", "another user", "chown")
	entries, _ := os.ReadDir(dir)
	if len(entries) > 0 {
		t.Errorf("the node wrote %s in a folder of another user", entries[0].Name())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o777 {
		t.Errorf("the folder of another user was changed to %04o", fi.Mode().Perm())
	}
}

// A data folder named by a symbolic link another user made (in /tmp, say)
// is refused, and what the link points to is left as it was: the node
// would otherwise narrow and fill a folder of the link's choosing. Needs
// root, to make a link of another user.
func TestDataFolderLinkOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a symbolic link owned by another user")
	}
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o755)
	link := filepath.Join(base, "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = link, "127.0.0.1:0", ""
	startRefused(t, cfg, "through a symbolic link of another user", link, "data_dir", "symbolic link", "another user")
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was changed to %04o", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(target); len(entries) > 0 {
		t.Errorf("the node wrote %s in the link's target", entries[0].Name())
	}
}

// A folder above the data folder that other users may change (writable
// by group or others without the sticky bit, or owned by another user
// than the node's or root) lets them move the data folder away and put
// one of their own in its place between two starts: the node warns at
// start, naming the folder and why. /tmp's sticky bit keeps others from
// renaming what is not theirs, so a folder like it is not named. The node
// still starts: a volume's group-writable root (Kubernetes' fsGroup)
// is common, and the data folder itself is checked and narrowed as before.
func TestDataFolderParentsOpenToOthersWarned(t *testing.T) {
	cases := []struct {
		name string
		mode fs.FileMode // of the folder above the data folder
		uid  int         // give that folder to this user (needs root; -1: the node's)
		gid  int         // and this group (-1: the node's)
		warn []string    // in the log; none: no warning about parents
	}{
		{name: "writable by others", mode: 0o777, uid: -1, gid: -1, warn: []string{"a folder above the data folder can be changed by other users", "/open", "mode=0777"}},
		{name: "writable by another group", mode: 0o775, uid: -1, gid: 4242, warn: []string{"a folder above the data folder can be changed by other users", "/open", "mode=0775"}},
		{name: "writable by the node's own group", mode: 0o775, uid: -1, gid: -1},
		{name: "sticky like /tmp", mode: 0o777 | fs.ModeSticky, uid: -1, gid: -1},
		{name: "private", mode: 0o755, uid: -1, gid: -1},
		{name: "another user's", mode: 0o755, uid: 4242, gid: -1, warn: []string{"a folder above the data folder can be changed by other users", "/open", "owner=4242"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.uid >= 0 || tc.gid >= 0) && os.Geteuid() != 0 {
				t.Skip("needs root to give a folder to another user or group")
			}
			parent := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(parent, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			var logs testutil.LockedBuffer
			cfg := config.Default()
			cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(parent, "data"), "127.0.0.1:0", ""
			ctx, cancel := context.WithCancel(context.Background())
			n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			cancel()
			n.Wait()
			got := logs.String()
			for _, want := range tc.warn {
				if !strings.Contains(got, want) {
					t.Errorf("no %q in the log:\n%s", want, got)
				}
			}
			if len(tc.warn) == 0 && strings.Contains(got, "folder above the data folder") {
				t.Errorf("a warning about a folder others cannot change:\n%s", got)
			}
		})
	}
}

// A data folder named by a symbolic link: the folders above the link are
// looked at too (whoever can change the link's folder can put another
// link there), beside those above where it leads.
func TestDataFolderLinkInAnOpenFolderWarned(t *testing.T) {
	base := t.TempDir()
	private := filepath.Join(base, "private")
	open := filepath.Join(base, "open")
	for _, d := range []string{private, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(private, "data")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(open, "data")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	var logs testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = link, "127.0.0.1:0", ""
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	n.Wait()
	if got := logs.String(); !strings.Contains(got, "a folder above the data folder can be changed by other users") || !strings.Contains(got, "folder="+open+" ") {
		t.Errorf("no warning naming %s, the link's open folder:\n%s", open, got)
	}
}
