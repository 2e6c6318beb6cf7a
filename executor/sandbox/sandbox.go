package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are the caps of a Sandbox. They are enforced: an operation that
// would pass one fails with a *LimitError and changes nothing. A zero field
// takes its value from DefaultLimits; there is no "unlimited".
type Limits struct {
	MaxFileSize     int64         // bytes of one file read, written or touched
	MaxTotalBytes   int64         // bytes of all regular files in the sandbox after a promotion
	MaxTotalEntries int64         // regular files and directories in the sandbox after a promotion
	MaxEntries      int           // entries one List may return
	MaxChanges      int           // changes in one Stage
	MaxDuration     time.Duration // wall time of one Read, List, Stage, Promote or Rollback
}

// DefaultLimits are the caps used for the zero fields of Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxFileSize:   1 << 20,
		MaxTotalBytes: 100 << 20,
		// A walk of the tree, which counts it at Open and at each
		// Recount, costs about 30 µs a directory and 2.5 µs a file on a
		// small machine: 100,000 entries are a few seconds at most.
		MaxTotalEntries: 100_000,
		MaxEntries:      1000,
		MaxChanges:      64,
		MaxDuration:     10 * time.Second,
	}
}

func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits()
	if l.MaxFileSize < 0 || l.MaxTotalBytes < 0 || l.MaxTotalEntries < 0 || l.MaxEntries < 0 || l.MaxChanges < 0 || l.MaxDuration < 0 {
		return Limits{}, fmt.Errorf("sandbox: negative limit in %+v", l)
	}
	l.MaxFileSize = cmp.Or(l.MaxFileSize, d.MaxFileSize)
	l.MaxTotalBytes = cmp.Or(l.MaxTotalBytes, d.MaxTotalBytes)
	l.MaxTotalEntries = cmp.Or(l.MaxTotalEntries, d.MaxTotalEntries)
	l.MaxEntries = cmp.Or(l.MaxEntries, d.MaxEntries)
	l.MaxChanges = cmp.Or(l.MaxChanges, d.MaxChanges)
	l.MaxDuration = cmp.Or(l.MaxDuration, d.MaxDuration)
	return l, nil
}

// Sandbox is the workspace folder, reached only through an os.Root. Its
// methods are safe for concurrent use; promotions and rollbacks run one at
// a time.
type Sandbox struct {
	core  *core
	lim   Limits
	check func(context.Context) error // see Checked; nil: none
}

// core is what the views of one sandbox (see Narrow) share.
type core struct {
	ws *workspace
	mu sync.Mutex // held by Promote, Rollback and Recover
	// locked: the holder of mu holds the folder lock too (lockFolder).
	locked bool
	// held is CountFile as the holder of mu last read or wrote it while
	// locked: no process writes it meanwhile, so a promotion reads it
	// once (see lockedCount). Forgotten when the locks go.
	held heldCount
	// shared: the folder is locked (its file system keeps locks), and
	// the count is kept in CountFile too, for every process sharing it.
	shared atomic.Bool
	tally  tally
	hooks  hooks
	now    func() time.Time // the time kept files are named with (keptName)
	// spelling is what probeFolds found of the workspace folder, at Open
	// and each time the folder is opened again.
	spelling atomic.Pointer[spelling]
}

// hooks let the package's tests inject failures at the points where a
// crash or a race matters. All nil outside tests.
type hooks struct {
	beforeRename func(rel string) error // a temp file is written, not yet renamed
	beforeOp     func(o op) error       // before each step of a promotion or rollback
	syncDir      func() error           // before each directory sync
	lockBusy     func()                 // the folder lock is held elsewhere: waiting
	// swap runs inside a replacement or removal of a file (see writeIn,
	// removeIn): step "aside", the file is renamed to its private name,
	// not yet checked; "in", the new image is in, the file set aside not
	// yet hashed again; "remove", the file set aside is about to be
	// removed; "rmdir", a directory to remove was looked at, not yet
	// removed; "record", the record of the files kept was looked at, not
	// yet opened.
	swap func(step, rel string) error
	// portable has the sandbox replace files as it does where the system
	// cannot exchange two names or rename without replacing (off Linux):
	// link and remove, files set aside before the new image goes in.
	portable bool
	// linked runs inside a rename that must not replace, done as a link
	// and a removal (portable): the link from from to to is made, from
	// not yet removed.
	linked func(from, to string)
	// lookup stands for the file system's own look-up of name in d: the
	// name of the entry it finds. The tests set it to act as a file
	// system that ignores case would; nil: name itself.
	lookup func(d *os.Root, name string) string
	// removing runs before the sandbox removes a file of its own (set
	// aside, temporary): open, whether it still holds it open.
	removing func(name string, open bool)
	// walk runs as a walk of the tree comes to each entry, before its
	// Lstat.
	walk func(rel string)
}

// Open opens the workspace folder dir (which must exist) as a sandbox with
// the caps lim. The sandbox follows the folder: deleted and made again, it
// is reopened at the next operation; while it is missing, operations fail
// with a *WorkspaceError (ErrNoWorkspace) naming it. A folder missing at
// Open is fs.ErrNotExist.
func Open(dir string, lim Limits) (*Sandbox, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	ws, err := openWorkspace(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open workspace: %w", err)
	}
	c := &core{ws: ws, now: time.Now}
	s := &Sandbox{core: c, lim: lim}
	c.spelling.Store(s.probeFolds(ws.root))
	ws.reopened = func(root *os.Root) {
		c.tally.forget()
		c.spelling.Store(s.probeFolds(root))
	}
	// The folder lock's file is made now, when it can be, rather than
	// at the first promotion (which makes it otherwise), and tried: a
	// file system that keeps locks shares the count (CountFile).
	if folderLocks {
		if f, err := s.openLock(); err == nil {
			_, err := tryLockFolder(f)
			c.shared.Store(err == nil)
			f.Close()
		}
	}
	return s, nil
}

// Close releases the workspace folder, for every view of it.
func (s *Sandbox) Close() error { return s.core.ws.close() }

// Limits returns the caps in force.
func (s *Sandbox) Limits() Limits { return s.lim }

// Narrow returns a view of the same sandbox whose caps are the smaller of
// the current ones and the non-zero fields of lim (an action's declared
// resources, say). The view shares the folder and the promotion lock, and
// keeps s's check (see Checked).
func (s *Sandbox) Narrow(lim Limits) *Sandbox {
	n := s.lim
	narrow(&n.MaxFileSize, lim.MaxFileSize)
	narrow(&n.MaxTotalBytes, lim.MaxTotalBytes)
	narrow(&n.MaxTotalEntries, lim.MaxTotalEntries)
	narrow(&n.MaxEntries, lim.MaxEntries)
	narrow(&n.MaxChanges, lim.MaxChanges)
	narrow(&n.MaxDuration, lim.MaxDuration)
	return &Sandbox{core: s.core, lim: n, check: s.check}
}

// narrow lowers *cap to lim when lim is set (above 0) and smaller.
func narrow[T int | int64 | time.Duration](cap *T, lim T) {
	if lim > 0 {
		*cap = min(*cap, lim)
	}
}

// Checked returns a view of the same sandbox, with the same caps, whose
// Promote, PromotePrepared, Rollback and Recover call check once they hold
// the locks of a change (this process's and the folder's, see
// LockFile), before they look at any path: an error of check stops them,
// nothing changed, and is returned as it is. The caller makes sure there
// that it may still change the workspace (its record of the change is
// still its own, say): another that would take that from it, then change
// the workspace itself under the same locks, cannot do so between the
// check and the change. Where the folder is not locked (see the package
// documentation) that holds within one process only. check is given the
// operation's context, bounded by MaxDuration. A view of s that already
// has a check has check instead.
func (s *Sandbox) Checked(check func(ctx context.Context) error) *Sandbox {
	return &Sandbox{core: s.core, lim: s.lim, check: check}
}

// bound applies MaxDuration to ctx. When it is this cap that ends the
// context, context.Cause gives a *LimitError.
func (s *Sandbox) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.lim.MaxDuration, &LimitError{
		Limit: LimitDuration, Max: s.lim.MaxDuration.Milliseconds(), Err: context.DeadlineExceeded,
	})
}

// alive returns nil while ctx runs, then why it stopped.
func alive(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Kind is what a path is.
type Kind string

// The kinds of a path. Anything else (symbolic link, FIFO, device, socket)
// is refused before it is opened.
const (
	KindAbsent Kind = "absent"
	KindFile   Kind = "file"
	KindDir    Kind = "dir"
)

// Image is the state of one path: what it is and, for a file, its size,
// SHA-256 and permission bits. Content is kept where it is needed (the
// pre-images of a Snapshot) and is empty elsewhere.
type Image struct {
	Kind    Kind   `json:"kind"`
	Size    int64  `json:"size,omitempty"`
	SHA256  string `json:"sha256,omitempty"` // lower-case hex, files only
	Mode    Perm   `json:"mode,omitempty"`
	Content []byte `json:"content,omitempty"`
}

// same reports whether two images describe the same state: same kind and,
// for files, same content. Permission bits are not compared.
// Perm is permission bits, written in JSON as an octal string ("0644").
type Perm fs.FileMode

func (p Perm) String() string { return fmt.Sprintf("%04o", uint32(p)) }

// MarshalJSON writes p as "0644".
func (p Perm) MarshalJSON() ([]byte, error) { return []byte(`"` + p.String() + `"`), nil }

// UnmarshalJSON reads "0644"; anything but permission bits is an error.
func (p *Perm) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n&^0o777 != 0 {
		return fmt.Errorf("sandbox: mode %q is not octal permission bits", s)
	}
	*p = Perm(n)
	return nil
}

func (i Image) same(j Image) bool {
	return i.Kind == j.Kind && (i.Kind != KindFile || i.SHA256 == j.SHA256)
}

func (i Image) summary() Image {
	i.Content = nil
	return i
}

// Read returns the content of the file at the virtual path p. It refuses
// anything but a regular file with one link, reached without a symbolic
// link, of at most MaxFileSize bytes.
func (s *Sandbox) Read(ctx context.Context, p string) ([]byte, error) {
	rel, err := Normalize(p)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	img, err := s.load(ctx, rel)
	if err != nil {
		return nil, opErr("read", rel, err)
	}
	switch img.Kind {
	case KindAbsent:
		return nil, opErr("read", rel, fs.ErrNotExist)
	case KindDir:
		return nil, opErr("read", rel, ErrNotRegular)
	}
	return img.Content, nil
}

// Stat returns what the virtual path p is: KindFile, KindDir, or
// KindAbsent when it (or a directory above it) does not exist. It reads
// no content. A symbolic link on the way, or at p, is ErrSymlink; a FIFO,
// device or socket at p is ErrNotRegular; a directory above p that is a
// file makes p absent.
func (s *Sandbox) Stat(ctx context.Context, p string) (Kind, error) {
	rel, err := Normalize(p)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return KindDir, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, name, err := s.openParent(ctx, rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotDir) {
		return KindAbsent, nil
	}
	if err != nil {
		return "", opErr("stat", rel, err)
	}
	defer d.close()
	fi, err := d.r.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return KindAbsent, nil
	case err != nil:
		return "", opErr("stat", rel, bare(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", opErr("stat", rel, ErrSymlink)
	case fi.IsDir():
		return KindDir, nil
	case fi.Mode().IsRegular():
		return KindFile, nil
	}
	return "", opErr("stat", rel, ErrNotRegular)
}

// Entry is one name in a listing.
type Entry struct {
	Name string `json:"name"`
	Path string `json:"path"`           // virtual
	Kind string `json:"kind"`           // "file", "dir", "symlink" or "other"
	Size int64  `json:"size,omitempty"` // files only
	// Invalid, when set, is the Rule the entry's path breaks (a name put
	// in the workspace by another process: a control character, a bidi
	// override, bytes that are not UTF-8, …): no proposal can name it.
	// A name that is not valid UTF-8 is shown with U+FFFD in place of
	// each bad byte, so it can be a JSON string.
	Invalid Rule `json:"invalid,omitempty"`
}

// listBatch is how many names List reads from the directory at once.
const listBatch = 256

// errStop, returned by the function eachName calls, ends the read early:
// eachName then returns nil.
var errStop = errors.New("sandbox: stop reading the directory")

// eachName calls fn with each name in the directory r, read listBatch
// names at a time (a directory of any size is held a batch at a time),
// checking ctx before each batch. It stops at fn's first error, returned
// as it is (errStop: nil), or at ctx's end, whose cause it returns as it
// is. An error opening or reading the directory is returned through
// readErr. The names of a batch read with an error are given to fn
// before the error is returned.
func eachName(ctx context.Context, r *os.Root, readErr func(error) error, fn func(name string) error) error {
	f, err := r.Open(".")
	if err != nil {
		return readErr(err)
	}
	defer f.Close()
	for {
		if err := alive(ctx); err != nil {
			return err
		}
		names, rerr := f.Readdirnames(listBatch)
		for _, name := range names {
			if err := fn(name); err != nil {
				if err == errStop {
					return nil
				}
				return err
			}
		}
		if rerr == io.EOF || (rerr == nil && len(names) == 0) {
			return nil
		}
		if rerr != nil {
			return readErr(rerr)
		}
	}
}

// List returns the entries of the directory at the virtual path p, sorted
// by name, without following any symbolic link (a link is listed as
// "symlink"). The sandbox's own temporary files are not shown. A directory
// holding more than MaxEntries entries is a *LimitError, not a partial
// listing.
func (s *Sandbox) List(ctx context.Context, p string) ([]Entry, error) {
	out, _, err := s.list(ctx, p, 0)
	return out, err
}

// ListFirst returns the first n entries (n > 0) of the directory at the
// virtual path p, by name, as List would show them, and how many others
// it holds. It reads every name but keeps and describes only n, so a
// directory of any size is listed in bounded memory (MaxEntries does not
// apply; MaxDuration does).
func (s *Sandbox) ListFirst(ctx context.Context, p string, n int) ([]Entry, int, error) {
	if n <= 0 {
		return nil, 0, fmt.Errorf("sandbox: ListFirst of %d entries", n)
	}
	return s.list(ctx, p, n)
}

// list is List (first 0: every entry, under MaxEntries) and ListFirst.
func (s *Sandbox) list(ctx context.Context, p string, first int) ([]Entry, int, error) {
	rel, err := Normalize(p)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, err := s.openDir(ctx, rel)
	if err != nil {
		return nil, 0, opErr("list", rel, err)
	}
	defer d.close()
	// The names kept, sorted: every one (first 0), or the first smallest.
	var kept []string
	total := 0
	err = eachName(ctx, d.r, func(err error) error { return err }, func(name string) error {
		if strings.HasPrefix(name, ReservedPrefix) {
			return nil
		}
		total++
		if first == 0 {
			if total > s.lim.MaxEntries {
				return &LimitError{Limit: LimitEntries, Path: Virtual(rel), Max: int64(s.lim.MaxEntries), Got: int64(total)}
			}
			kept = append(kept, name)
			return nil
		}
		if at, _ := slices.BinarySearch(kept, name); at < first {
			kept = slices.Insert(kept, at, name)
			if len(kept) > first {
				kept = kept[:first]
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, opErr("list", rel, err)
	}
	if first == 0 {
		slices.Sort(kept)
	}
	out := make([]Entry, 0, len(kept))
	for _, name := range kept {
		e := Entry{Name: name, Path: Virtual(join(rel, name)), Kind: "other"}
		if _, err := Normalize(e.Path); err != nil {
			var pe *PathError
			errors.As(err, &pe)
			e.Invalid = pe.Rule
			e.Name, e.Path = strings.ToValidUTF8(e.Name, "\uFFFD"), strings.ToValidUTF8(e.Path, "\uFFFD")
		}
		// Lstat through the directory's own Root: never a host path.
		fi, err := d.r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			total--
			continue // removed while we read
		}
		if err != nil {
			return nil, 0, opErr("list", join(rel, name), err)
		}
		switch {
		case fi.Mode().IsRegular():
			e.Kind, e.Size = "file", fi.Size()
		case fi.IsDir():
			e.Kind = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Kind = "symlink"
		}
		out = append(out, e)
	}
	return out, total - len(out), nil
}

// Sweep removes the temporary files a crash may have left behind (names
// starting with ReservedPrefix) and returns how many it removed. Call it
// at start-up, before the first promotion. It leaves alone the temporary
// files a live writer holds (each is locked by its writer from its
// creation until it is renamed or removed, and a process that ends
// releases its locks): those of this process and of any other process
// working on the same folder, such as another replica of the node that
// shares its workspace and is promoting now. A temporary file it cannot
// open or lock (a file system without locks) is left too. Off Linux, macOS
// and the BSDs nothing is locked and Sweep removes every temporary file.
func (s *Sandbox) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var stale []string
	err := s.walk(ctx, func(rel string, fi fs.FileInfo) error {
		// A file set aside (asideName) is the workspace's, not the
		// sandbox's: Recover puts it back. A record of the files kept
		// (keptRecordName) is what a recovery reads. The shared count
		// (CountFile) is kept; a copy of it left half-written (countTemp)
		// is removed by its next write.
		if fi.Mode().IsRegular() && strings.HasPrefix(base(rel), ReservedPrefix) && rel != LockFile && rel != CountFile && rel != countTemp && !strings.HasPrefix(base(rel), asidePrefix) &&
			!strings.HasPrefix(rel, keptRecordPrefix) {
			stale = append(stale, rel)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.core.mu.Lock()
	defer s.core.mu.Unlock()
	n := 0
	for _, rel := range stale {
		if err := alive(ctx); err != nil {
			return n, err
		}
		gone, err := s.sweepOne(ctx, rel)
		if err != nil {
			return n, opErr("sweep", rel, err)
		}
		if gone {
			n++
		}
	}
	return n, nil
}

// sweepOne removes the temporary file rel if no writer holds it, and
// reports whether it did.
func (s *Sandbox) sweepOne(ctx context.Context, rel string) (bool, error) {
	d, err := s.openDir(ctx, parentOf(rel))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotDir) || errors.Is(err, ErrSymlink) {
		return false, nil // its directory went: so did the file
	}
	if err != nil {
		return false, err
	}
	defer d.close()
	name := base(rel)
	f, err := d.r.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return false, nil // renamed or removed since the walk, or not ours to open
	}
	defer f.Close()
	fi, lerr := d.r.Lstat(name)
	got, serr := f.Stat()
	if lerr != nil || serr != nil || !os.SameFile(fi, got) || !got.Mode().IsRegular() || !abandoned(f) {
		return false, nil
	}
	// Held by this sweep until f is closed: no writer takes it meanwhile.
	if err := d.r.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, bare(err)
	}
	return true, nil
}

// walk calls fn for every entry under the root, depth first, descending
// only into real directories (never through a symbolic link).
func (s *Sandbox) walk(ctx context.Context, fn func(rel string, fi fs.FileInfo) error) error {
	var visit func(dir string) error
	visit = func(dir string) error {
		d, err := s.openDir(ctx, dir)
		if err != nil {
			return opErr("walk", dir, err)
		}
		defer d.close()
		readErr := func(err error) error { return opErr("walk", dir, err) }
		return eachName(ctx, d.r, readErr, func(name string) error {
			if s.core.hooks.walk != nil {
				s.core.hooks.walk(join(dir, name))
			}
			fi, err := d.r.Lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return opErr("walk", join(dir, name), err)
			}
			rel := join(dir, name)
			if err := fn(rel, fi); err != nil {
				return err
			}
			if fi.IsDir() {
				err := visit(rel)
				// Replaced by a link or a file, or removed, since the
				// Lstat: there is no directory left to count.
				if err != nil && !errors.Is(err, ErrSymlink) && !errors.Is(err, ErrNotDir) && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			return nil
		})
	}
	return visit("")
}

// dir is an open directory of the sandbox.
type dir struct {
	r     *os.Root
	owned bool // false for the sandbox root itself, which stays open
	// folds: its file system may find a name under another spelling
	// (see spelled).
	folds bool
}

func (d dir) close() {
	if d.owned {
		d.r.Close()
	}
}

// openDir opens the directory rel ("" is the root) one component at a
// time, refusing any component that is a symbolic link.
func (s *Sandbox) openDir(ctx context.Context, rel string) (dir, error) {
	root, err := s.core.ws.current()
	if err != nil {
		return dir{}, err
	}
	sp := s.core.spelling.Load()
	cur := dir{r: root, folds: sp.folds}
	if rel == "" {
		return cur, nil
	}
	for name := range strings.SplitSeq(rel, "/") {
		if err := alive(ctx); err != nil {
			cur.close()
			return dir{}, err
		}
		if err := s.spelled(ctx, cur, name); err != nil {
			cur.close()
			return dir{}, err
		}
		next, fi, err := openChild(cur.r, s.sysName(cur.r, name))
		cur.close()
		if err != nil {
			return dir{}, err
		}
		// A directory on another file system than the folder (one
		// mounted inside it) may fold names where the folder does not.
		cur = dir{r: next, owned: true, folds: cur.folds || !sp.onDevice(fi)}
	}
	return cur, nil
}

// openParent opens the directory above rel, as openDir, and gives the
// name rel has in it. Each name of rel that is there must be spelled as
// it is stored (spelled): this and openDir are where every path a
// proposal names is looked up.
func (s *Sandbox) openParent(ctx context.Context, rel string) (dir, string, error) {
	d, err := s.openDir(ctx, parentOf(rel))
	if err != nil {
		return dir{}, "", err
	}
	name := base(rel)
	if err := s.spelled(ctx, d, name); err != nil {
		d.close()
		return dir{}, "", err
	}
	return d, s.sysName(d.r, name), nil
}

// sysName is the name the file system finds for name in d: name itself,
// unless a test stands in for the file system (hooks.lookup).
func (s *Sandbox) sysName(d *os.Root, name string) string {
	if s.core.hooks.lookup == nil {
		return name
	}
	return s.core.hooks.lookup(d, name)
}

// openChild opens the directory name inside parent. os.Root would follow a
// symbolic link that stays inside the root; the sandbox follows none: it
// looks at the name without following it, opens it, and checks that what
// it opened is the very directory it looked at. A link swapped in between
// fails that check (and os.Root still stops one that leads outside). It
// gives the directory opened and its description.
func openChild(parent *os.Root, name string) (*os.Root, fs.FileInfo, error) {
	fi, err := parent.Lstat(name)
	if err != nil {
		return nil, nil, bare(err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, nil, ErrSymlink
	case !fi.IsDir():
		return nil, nil, ErrNotDir
	}
	child, err := parent.OpenRoot(name)
	if err != nil {
		if again, lerr := parent.Lstat(name); lerr == nil && again.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, ErrSymlink
		}
		return nil, nil, bare(err)
	}
	got, err := child.Stat(".")
	if err != nil || !os.SameFile(fi, got) {
		child.Close()
		return nil, nil, ErrSymlink
	}
	return child, got, nil
}

// load returns the image of rel, with the content of a file. A missing
// parent makes the path absent; a parent that is not a directory is
// ErrNotDir.
func (s *Sandbox) load(ctx context.Context, rel string) (Image, error) {
	if rel == "" {
		return Image{Kind: KindDir}, nil
	}
	d, name, err := s.openParent(ctx, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return Image{Kind: KindAbsent}, nil
	}
	if err != nil {
		return Image{}, err
	}
	defer d.close()
	return s.loadIn(ctx, d.r, name)
}

// loadIn is load for the name inside the open directory d.
func (s *Sandbox) loadIn(ctx context.Context, d *os.Root, name string) (Image, error) {
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return Image{Kind: KindAbsent}, nil
	}
	if err != nil {
		return Image{}, bare(err)
	}
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return Image{}, ErrSymlink
	case mode.IsDir():
		return Image{Kind: KindDir, Mode: Perm(mode.Perm())}, nil
	case !mode.IsRegular():
		return Image{}, ErrNotRegular
	}
	if err := singleLink(fi); err != nil {
		return Image{}, err
	}
	if fi.Size() > s.lim.MaxFileSize {
		return Image{}, &LimitError{Limit: LimitFileSize, Max: s.lim.MaxFileSize, Got: fi.Size()}
	}
	content, err := s.readIn(ctx, d, name, fi)
	if err != nil {
		return Image{}, err
	}
	return fileImage(content, Perm(mode.Perm())), nil
}

// readChunk is how much readIn reads between two looks at the context.
const readChunk = 64 << 10

// readIn reads the regular file name of d, which Lstat described as fi.
// The descriptor it opens must be that same file, still with one link;
// otherwise nothing is read. O_NONBLOCK keeps a FIFO swapped in from
// blocking the open.
func (s *Sandbox) readIn(ctx context.Context, d *os.Root, name string, fi fs.FileInfo) ([]byte, error) {
	f, err := d.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, bare(err)
	}
	defer f.Close()
	got, err := f.Stat()
	if err != nil {
		return nil, bare(err)
	}
	if !os.SameFile(fi, got) || !got.Mode().IsRegular() {
		return nil, ErrSymlink
	}
	if err := singleLink(got); err != nil {
		return nil, err
	}
	limit := s.lim.MaxFileSize
	buf := make([]byte, 0, min(got.Size(), limit)+1)
	r := io.LimitReader(f, limit+1)
	for {
		if err := alive(ctx); err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, readChunk)
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), len(buf)+readChunk)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bare(err)
		}
	}
	if int64(len(buf)) > limit {
		return nil, &LimitError{Limit: LimitFileSize, Max: limit, Got: int64(len(buf))}
	}
	return buf, nil
}

// singleLink refuses a regular file with more than one hard link.
func singleLink(fi fs.FileInfo) error {
	n, ok := linkCount(fi)
	if !ok || n != 1 {
		return ErrHardLink
	}
	return nil
}

// bare drops the *fs.PathError or *os.LinkError around a system error: the
// sandbox names paths itself, in their virtual form.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// opErr wraps err with the operation and the virtual path, unless it is
// already a *LimitError (which then gets the path) or an *OpError. The
// system error loses its own *fs.PathError: a file opened through an
// os.Root is named by its host path (the root's name joined with the
// file's), which an error of a read or a listing of it would carry to the
// requester.
func opErr(op, rel string, err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		if le.Path == "" {
			c := *le
			c.Path = Virtual(rel)
			return &c
		}
		return err
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Path: Virtual(rel), Err: bare(err)}
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func parentOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

func base(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }
