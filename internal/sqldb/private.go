package sqldb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// SQLitePath returns the file named by a SQLite DSN (see Open); ok is
// false for PostgreSQL and for a DSN Open would refuse.
func SQLitePath(dsn string) (path string, ok bool) {
	tg, err := parseDSN(dsn)
	if err != nil || tg.dialect != SQLite {
		return "", false
	}
	return tg.path, true
}

// PrivateFiles makes the SQLite database at path readable by its owner
// only: the file is created 0600 when it does not exist, and the file and
// its -wal, -shm and -journal files, when they exist with any permission
// for group or others, are set to 0600. SQLite gives the -wal and -shm
// files it creates the database file's mode, so they are private too. It
// returns the files whose mode it narrowed, for the caller to warn about.
// On Windows, which has no such modes, it only creates the file.
func PrivateFiles(path string) (narrowed []string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqldb: %w", err)
	}
	f.Close()
	if runtime.GOOS == "windows" {
		return nil, nil
	}
	// The database, then what SQLite keeps beside it: the WAL, its
	// shared-memory index, the rollback journal.
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		name := path + suffix
		fi, err := os.Stat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return narrowed, fmt.Errorf("sqldb: %w", err)
		case !fi.Mode().IsRegular():
			return narrowed, fmt.Errorf("sqldb: %s: want a regular file; got %v", name, fi.Mode().Type())
		case fi.Mode().Perm()&0o077 == 0:
			continue
		}
		if err := os.Chmod(name, 0o600); err != nil {
			return narrowed, fmt.Errorf("sqldb: %w", err)
		}
		narrowed = append(narrowed, name)
	}
	return narrowed, nil
}
