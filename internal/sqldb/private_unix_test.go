//go:build unix

package sqldb

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// PrivateFiles creates a database 0600 and narrows a database and the
// files beside it found open to others; Open does the same, so the WAL
// and shared memory SQLite then creates are 0600 too.
func TestPrivateFiles(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	if got, err := PrivateFiles(fresh); err != nil || len(got) != 0 {
		t.Fatalf("new database: narrowed %v, %v", got, err)
	}
	mode := func(name string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if m := mode(fresh); m != 0o600 {
		t.Errorf("new database %04o, want 0600", m)
	}

	wide := filepath.Join(dir, "wide.db")
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.WriteFile(wide+suffix, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "private.db"), nil, 0o600)
	got, err := PrivateFiles(wide)
	want := []string{wide, wide + "-wal", wide + "-shm", wide + "-journal"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("narrowed %v, %v; want %v", got, err, want)
	}
	for _, name := range want {
		if m := mode(name); m != 0o600 {
			t.Errorf("%s: %04o, want 0600", name, m)
		}
	}
	if got, err := PrivateFiles(filepath.Join(dir, "private.db")); err != nil || len(got) != 0 {
		t.Errorf("a private database: narrowed %v, %v", got, err)
	}

	// Open narrows too, and what SQLite creates follows the database.
	os.Remove(wide + "-wal")
	os.Remove(wide + "-shm")
	os.Remove(wide + "-journal")
	os.Chmod(wide, 0o644)
	db, err := Open(context.Background(), wide, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.W.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{wide, wide + "-wal", wide + "-shm"} {
		if m := mode(name); m != 0o600 {
			t.Errorf("after Open: %s: %04o, want 0600", name, m)
		}
	}
}

func TestSQLitePath(t *testing.T) {
	for dsn, want := range map[string]string{
		"/var/lib/snapnode/tasks.db":      "/var/lib/snapnode/tasks.db",
		"sqlite:///var/lib/snapnode/x.db": "/var/lib/snapnode/x.db",
		"postgres://u@h/db":               "",
		"sqlite::memory:":                 "",
		"data/tasks.db":                   "data/tasks.db",
	} {
		got, ok := SQLitePath(dsn)
		if got != want || ok != (want != "") {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q", dsn, got, ok, want)
		}
	}
}
