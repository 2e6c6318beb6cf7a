package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

// An error of a file opened through the sandbox's os.Root names the file
// by its host path (a read or a listing that fails): the sandbox's error
// names the virtual path only, and the system error stays matchable.
func TestOpErrNamesNoHostPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/notes", 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.Open("notes")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, closed := f.Readdirnames(1) // what a listing's failure looks like
	if closed == nil || !strings.Contains(closed.Error(), dir) {
		t.Fatalf("the os.Root file's error %v: want it to name the host path, as the test assumes", closed)
	}
	for _, c := range []struct {
		err    error
		system error // what errors.Is still finds
	}{
		{closed, closed.(*fs.PathError).Err},
		{&fs.PathError{Op: "read", Path: dir + "/notes/a.md", Err: syscall.EIO}, syscall.EIO},
		{&os.LinkError{Op: "rename", Old: dir + "/a", New: dir + "/b", Err: syscall.EXDEV}, syscall.EXDEV},
	} {
		err := opErr("list", "notes", c.err)
		if strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), `"/sandbox/notes"`) {
			t.Errorf("opErr(%v) = %q: want the virtual path, not the host's", c.err, err)
		}
		if !errors.Is(err, c.system) {
			t.Errorf("opErr(%v) = %v: lost %v", c.err, err, c.system)
		}
	}
}
