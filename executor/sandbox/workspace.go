package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// ErrNoWorkspace: the workspace folder is not there (deleted, or replaced
// by something that is not a folder). Every operation fails with it, in a
// *WorkspaceError naming the folder, until a folder is there again.
var ErrNoWorkspace = errors.New("sandbox: workspace folder is missing")

// WorkspaceError is the workspace folder missing. It matches
// ErrNoWorkspace only: never fs.ErrNotExist, so that a missing workspace
// is not mistaken for a missing file inside it.
type WorkspaceError struct {
	Dir    string // the folder, as given to Open
	Reason string // what the host said about it
}

func (e *WorkspaceError) Error() string {
	return fmt.Sprintf("sandbox: workspace folder %s is missing: %s", e.Dir, e.Reason)
}

func (e *WorkspaceError) Unwrap() error { return ErrNoWorkspace }

// workspace holds the os.Root of the workspace folder and follows the
// folder when it is deleted and made again: current compares the folder
// now at dir (device and inode) with the one the root holds, one stat per
// call, and reopens the root when they differ. Without it the node would
// keep working in the deleted folder, where nothing it writes is seen. A
// symbolic link put where the folder was is not followed (it could name
// any folder the node may write), unless dir was a link when the
// workspace was opened: that link is the operator's setting.
type workspace struct {
	dir  string
	link bool // dir was a symbolic link when opened: follow it

	mu     sync.Mutex
	root   *os.Root
	fi     fs.FileInfo // the folder root holds
	closed bool
	// reopened is called, with mu held, when the root was replaced by
	// root.
	reopened func(root *os.Root)
}

// openWorkspace opens the folder dir; a folder missing then is the host's
// error (fs.ErrNotExist for none), which names it.
func openWorkspace(dir string) (*workspace, error) {
	w := &workspace{dir: dir}
	if fi, err := os.Lstat(dir); err == nil {
		w.link = fi.Mode()&fs.ModeSymlink != 0
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	fi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	w.root, w.fi = root, fi
	return w, nil
}

// open opens the folder at dir and describes the very folder it opened.
func (w *workspace) open() (*os.Root, fs.FileInfo, error) {
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, nil, w.missing(err)
	}
	fi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, nil, w.missing(err)
	}
	return root, fi, nil
}

// missing is the error of a workspace folder the host cannot open.
func (w *workspace) missing(err error) error {
	reason := bare(err).Error()
	if errors.Is(err, fs.ErrNotExist) {
		reason = "it does not exist"
	}
	return &WorkspaceError{Dir: w.dir, Reason: reason}
}

// current returns the root of the folder now at dir: the open one while it
// is the same folder, a new one when the folder was made again (the old
// root is closed: an operation still running in the deleted folder fails),
// or a *WorkspaceError when there is no folder (a symbolic link where the
// folder was is none, see workspace).
func (w *workspace) current() (*os.Root, error) {
	stat := os.Lstat
	if w.link {
		stat = os.Stat
	}
	fi, err := stat(w.dir)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, fmt.Errorf("sandbox: workspace folder %s: %w", w.dir, os.ErrClosed)
	}
	switch {
	case err != nil:
		return nil, w.missing(err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &WorkspaceError{Dir: w.dir, Reason: "it is a symbolic link"}
	case !fi.IsDir():
		return nil, &WorkspaceError{Dir: w.dir, Reason: "it is not a folder"}
	case os.SameFile(fi, w.fi):
		return w.root, nil
	}
	root, got, err := w.open()
	if err != nil {
		return nil, err
	}
	if !w.link && !os.SameFile(fi, got) {
		// Replaced between the look and the open (by a link, say).
		root.Close()
		return nil, &WorkspaceError{Dir: w.dir, Reason: "it was replaced while it was opened"}
	}
	w.root.Close()
	w.root, w.fi = root, got
	if w.reopened != nil {
		w.reopened(root)
	}
	return root, nil
}

// close closes the root; current fails afterwards.
func (w *workspace) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.root.Close()
}

// forget drops the running count of the workspace, which described the
// folder that is gone: the next Stage walks the new one. A walk of the
// old folder running now is not kept.
func (t *tally) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known, t.partial = false, false
	for w := range t.walks {
		w.stale = true
		delete(t.walks, w)
	}
}
