package sandbox

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Operations return them wrapped in an *OpError (which
// names the operation and the path), a *LimitError or a *ScopeError; test
// them with errors.Is. A missing file is fs.ErrNotExist, as in package os.
var (
	// ErrInvalidPath: Normalize rejected the path (see PathError and Rule).
	ErrInvalidPath = errors.New("sandbox: invalid path")
	// ErrSymlink: a component of the path is a symbolic link. The sandbox
	// never reads, writes, lists, deletes or renames through one, wherever
	// it points, and never deletes or renames one.
	ErrSymlink = errors.New("sandbox: path goes through a symbolic link")
	// ErrHardLink: the file has more than one hard link, so it may be an
	// alias of a file outside the sandbox; it is never opened.
	ErrHardLink = errors.New("sandbox: file has more than one hard link")
	// ErrNotRegular: a regular file was needed (directories, FIFOs,
	// devices and sockets are refused).
	ErrNotRegular = errors.New("sandbox: not a regular file")
	// ErrSpelling: a name of the path finds, on a file system that
	// ignores letter case or Unicode normal form, an entry stored under
	// another spelling ("/sandbox/SECRETS/key.txt" finding
	// secrets/key.txt). The policy judged the path as spelled, so the
	// sandbox does not act on it; name the entry as a listing shows it.
	ErrSpelling = errors.New("sandbox: a name of the path is stored under another spelling (letter case or Unicode form)")
	// ErrNotDir: a directory was needed.
	ErrNotDir = errors.New("sandbox: not a directory")
	// ErrExists: the target of a create, mkdir or rename already exists.
	ErrExists = errors.New("sandbox: already exists")
	// ErrNotText: write, delete and rename targets must end in .txt or .md.
	ErrNotText = errors.New("sandbox: target is not a .txt or .md file")
	// ErrLimit: a cap of Limits was reached (see LimitError).
	ErrLimit = errors.New("sandbox: limit exceeded")
	// ErrChanged: at promotion, a touched path no longer matches the
	// pre-image it was staged against: when every path is checked, before
	// anything is applied, or as its file is replaced or removed (an edit
	// made in between, see the package doc). Nothing was promoted; stage
	// again and ask again.
	ErrChanged = errors.New("sandbox: changed since staging")
	// ErrDiverged: at rollback, a path no longer matches the post-image of
	// the promotion (when every path is checked, or as its file is
	// replaced or removed). Nothing was restored.
	ErrDiverged = errors.New("sandbox: changed since promotion")
	// ErrUndeclared: the staged effects are wider than the declared ones
	// (see ScopeError). This is a permanent block.
	ErrUndeclared = errors.New("sandbox: effects wider than declared")
	// ErrForeign: the Staged was made by another Sandbox.
	ErrForeign = errors.New("sandbox: staged by another sandbox")
	// ErrBadSnapshot: a Snapshot is malformed or inconsistent.
	ErrBadSnapshot = errors.New("sandbox: malformed snapshot")
)

// OpError is an operation that failed on one path.
type OpError struct {
	Op   string // "read", "list", "stage", "promote", "rollback", …
	Path string // virtual path, "/sandbox/…"
	Err  error
}

func (e *OpError) Error() string {
	return "sandbox: " + e.Op + " " + strconv.QuoteToASCII(e.Path) + ": " + strings.TrimPrefix(e.Err.Error(), "sandbox: ")
}

func (e *OpError) Unwrap() error { return e.Err }

// Limit names one cap of Limits.
type Limit string

// The caps.
const (
	LimitFileSize     Limit = "file_size"     // bytes of one file
	LimitTotalBytes   Limit = "total_bytes"   // bytes of all regular files in the sandbox
	LimitTotalEntries Limit = "total_entries" // regular files and directories in the sandbox
	LimitEntries      Limit = "entries"       // entries of one listing
	LimitChanges      Limit = "changes"       // changes in one Stage
	LimitDuration     Limit = "duration"      // milliseconds of one operation
)

// LimitError is a cap reached. It matches ErrLimit, and for LimitDuration
// also context.DeadlineExceeded.
type LimitError struct {
	Limit Limit
	Path  string // virtual path concerned, if any
	Max   int64
	Got   int64 // what was asked for or found; 0 when unknown
	Err   error // the cause, for LimitDuration the context's error
}

func (e *LimitError) Error() string {
	msg := "sandbox: limit " + string(e.Limit) + " exceeded (max " + strconv.FormatInt(e.Max, 10)
	if e.Got > 0 {
		msg += ", got " + strconv.FormatInt(e.Got, 10)
	}
	msg += ")"
	if e.Path != "" {
		msg += " at " + strconv.QuoteToASCII(e.Path)
	}
	return msg
}

func (e *LimitError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrLimit, e.Err}
	}
	return []error{ErrLimit}
}

// ScopeError lists the paths a staged change touches that were not
// declared. It matches ErrUndeclared.
type ScopeError struct {
	Undeclared []string // virtual paths, sorted
}

func (e *ScopeError) Error() string {
	return "sandbox: effects wider than declared: " + strings.Join(e.Undeclared, ", ")
}

func (e *ScopeError) Unwrap() error { return ErrUndeclared }
