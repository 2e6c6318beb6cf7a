package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrIncomplete: a promotion or rollback failed half-way and undoing its
// first steps failed too. The error also carries both causes; the sandbox
// is in neither state, and Recover with the same Snapshot repairs it.
var ErrIncomplete = errors.New("sandbox: failed half-way and could not undo")

// Promote applies a Staged to the sandbox, all of it or none of it. It
// first checks every touched path against its pre-image: if one changed
// since staging, it returns an *OpError matching ErrChanged and applies
// nothing (stage again, show the new diff, ask again). It checks
// MaxTotalBytes again too, against the workspace as it is now (other
// stagings may have been promoted since this one was staged): a
// *LimitError, and nothing applied. Then files are
// written to a temporary file in their own directory, synced and renamed
// over their target, and the directory is synced; files are deleted,
// directories created. If any step fails, the steps already done are
// undone and the error returned. The Snapshot returned is the one
// st.Snapshot() gives.
func (s *Sandbox) Promote(ctx context.Context, st *Staged) (*Snapshot, error) {
	return s.promote(ctx, st, nil)
}

// promote is Promote, with the temporary files of temps (by path) written
// ahead by Prepare.
func (s *Sandbox) promote(ctx context.Context, st *Staged, temps map[string]*tempFile) (*Snapshot, error) {
	if st.core != s.core {
		return nil, ErrForeign
	}
	ctx, done, err := s.exclusive(ctx, "promote")
	if err != nil {
		return nil, err
	}
	defer done()
	steps := make([]entry, len(st.entries))
	var grow int64
	for i, e := range st.entries {
		cur, err := s.load(ctx, e.rel)
		if err != nil {
			return nil, opErr("promote", e.rel, err)
		}
		if !cur.same(e.pre) {
			return nil, opErr("promote", e.rel, ErrChanged)
		}
		steps[i] = entry{rel: e.rel, pre: cur, post: e.post}
		grow += e.post.Size - cur.Size
	}
	// Stage judged the room against the workspace as it was then; other
	// stagings may have been promoted since (other workers, other
	// replicas). Judged again under the locks, no two fill it past the cap.
	if grow > 0 {
		if err := s.room(ctx, grow); err != nil {
			return nil, err
		}
	}
	if err := s.transition(ctx, "promote", steps, temps); err != nil {
		return nil, err
	}
	return st.Snapshot(), nil
}

// Rollback restores the pre-images of a promotion, all of them or none:
// only if the current state of every path still equals its post-image
// (otherwise an *OpError matching ErrDiverged names the first path that
// differs, and nothing is restored). A directory the promotion created is
// removed only if it holds nothing else.
func (s *Sandbox) Rollback(ctx context.Context, snap *Snapshot) error {
	return s.restore(ctx, snap, false, nil)
}

// Recover is Rollback for a promotion that may have stopped half-way (a
// crash, or ErrIncomplete): each path may be in its post-image or already
// in its pre-image; any other state is ErrDiverged.
func (s *Sandbox) Recover(ctx context.Context, snap *Snapshot) error {
	return s.restore(ctx, snap, true, nil)
}

// Divergence is a path RecoverAround left as it found it, something
// else having changed it since the promotion.
type Divergence struct {
	Path string // virtual
	// Pre and Post are the path's images in the snapshot, Found what it
	// holds now (contents left out). Found is zero when the path cannot be
	// read as the sandbox reads (a symbolic link, a FIFO, a file with
	// another link or past MaxFileSize, a name stored under another
	// spelling, a folder above it that is no longer one); Note then says
	// what it is. For a
	// directory the promotion created that holds something else now,
	// Found is that directory and Note names the entry.
	Pre, Post, Found Image
	Note             string
	// Kept, when set, is the visible name (virtual) beside Path that a
	// file the interrupted change had set aside under a private name was
	// moved to: it held neither image (an edit made while it was set
	// aside, through a descriptor opened before). Found is then what the
	// path holds, left as found (the promotion's own image, where the
	// crash came once it was in), and Note names both names.
	Kept string
}

// RecoverAround is Recover that never changes a path something else
// changed since the promotion: a path that holds neither image (or
// cannot be read as the sandbox reads, or is a directory the promotion
// created that holds something else now) is left as found and returned,
// in the snapshot's order, with the directories that hold it (a path
// absent before whose folder is no longer one is taken as put back); every
// other path is put back to its pre-image, as Recover would, all of them
// or none (an error, and nothing changed). A file the interrupted change
// set aside under its private name that holds neither image (where
// Recover fails) is moved to a visible name beside its path (see
// keptName), and the path left as found and returned with Kept set:
// nothing hidden is left to bar a later change of the path.
func (s *Sandbox) RecoverAround(ctx context.Context, snap *Snapshot) ([]Divergence, error) {
	left := []Divergence{}
	if err := s.restore(ctx, snap, true, &left); err != nil {
		return nil, err
	}
	return left, nil
}

// unreadable reports whether err is load's for a path that holds what
// the sandbox never reads or writes over: something else put it there.
func unreadable(err error) bool {
	return errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrHardLink) || errors.Is(err, ErrLimit)
}

// restore is Rollback, or Recover when partial. With left (only with
// partial), a path that diverged is appended to it and left as found,
// rather than refused.
func (s *Sandbox) restore(ctx context.Context, snap *Snapshot, partial bool, left *[]Divergence) error {
	op := "rollback"
	if partial {
		op = "recover"
	}
	entries, err := snap.entries()
	if err != nil {
		return err
	}
	ctx, done, err := s.exclusive(ctx, op)
	if err != nil {
		return err
	}
	defer done()
	leave := func(e entry, found Image, note string) {
		*left = append(*left, Divergence{Path: Virtual(e.rel), Pre: e.pre.summary(), Post: e.post.summary(), Found: found.summary(), Note: note})
	}
	going := make(map[string]bool)
	var steps []entry
	for _, e := range entries {
		if partial && (e.pre.Kind == KindFile || e.post.Kind == KindFile) {
			moved, err := s.unstash(ctx, e, left != nil)
			if err != nil {
				return opErr(op, e.rel, err)
			}
			if moved != nil {
				// The edit kept, the path is left as it is: the
				// promotion's own image, where the crash came once it
				// was in.
				cur, err := s.load(ctx, e.rel)
				note := moved.String()
				if unreadable(err) || errors.Is(err, ErrSpelling) || errors.Is(err, ErrNotDir) {
					cur, note = Image{}, strings.TrimPrefix(err.Error(), "sandbox: ")+"; "+note
				} else if err != nil {
					return opErr(op, e.rel, err)
				}
				*left = append(*left, Divergence{Path: Virtual(e.rel), Pre: e.pre.summary(), Post: e.post.summary(),
					Found: cur.summary(), Note: note, Kept: Virtual(moved.kept)})
				continue
			}
		}
		cur, err := s.load(ctx, e.rel)
		if left != nil && errors.Is(err, ErrNotDir) && e.pre.Kind == KindAbsent {
			continue // a folder it was in is something else now: gone with it
		}
		if left != nil && (unreadable(err) || errors.Is(err, ErrNotDir) || errors.Is(err, ErrSpelling)) {
			leave(e, Image{}, strings.TrimPrefix(err.Error(), "sandbox: "))
			continue
		}
		if err != nil {
			return opErr(op, e.rel, err)
		}
		switch {
		case cur.same(e.post):
		case partial && cur.same(e.pre):
			continue
		case left != nil:
			leave(e, cur, "")
			continue
		default:
			return opErr(op, e.rel, ErrDiverged)
		}
		if cur.same(e.pre) {
			continue
		}
		steps = append(steps, entry{rel: e.rel, pre: cur, post: e.pre})
		if (cur.Kind == KindFile && e.pre.Kind != KindFile) || (cur.Kind == KindDir && e.pre.Kind != KindDir) {
			going[e.rel] = true
		}
	}
	if left != nil {
		var err error
		if steps, err = s.keepHolding(ctx, op, steps, going, entries, leave); err != nil {
			return err
		}
	}
	// A directory to remove must hold nothing but what goes with it.
	for _, e := range steps {
		if e.pre.Kind != KindDir || e.post.Kind == KindDir {
			continue
		}
		names, err := s.names(ctx, e.rel)
		if err != nil {
			return opErr(op, e.rel, err)
		}
		for _, n := range names {
			if !going[join(e.rel, n)] {
				return opErr(op, e.rel, fmt.Errorf("%w: holds %q", ErrDiverged, n))
			}
		}
	}
	return s.transition(ctx, op, steps, nil)
}

// unstash settles the file a crash left set aside (asideName) while the
// path of e was replaced or removed. Where the path is empty, the file
// goes back to it; where the path is the same file (a second link), the
// private name goes. Where the path holds a file again (the crash came
// after the new image went in), the file set aside goes if it holds one
// of e's images, which the snapshot keeps. Holding anything else (an
// edit made meanwhile), it is moved to a visible name beside the path
// when move is set (moved says where); otherwise it stays, and the error
// matches ErrDiverged and names it.
func (s *Sandbox) unstash(ctx context.Context, e entry, move bool) (moved *keptFile, err error) {
	d, name, err := s.openParent(ctx, e.rel)
	if err != nil {
		return nil, nil // no folder to hold it: load says what the path is
	}
	defer d.close()
	a := asideName(name)
	fa, err := d.r.Lstat(a)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		// Unreadable (EIO, EACCES): a file may be set aside there, which
		// a recovery that went on would leave hidden.
		return nil, bare(err)
	}
	fn, err := d.r.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.renameNoReplace(d.r, a, name); err != nil {
			return nil, err
		}
		s.core.tally.forget() // a file counted in again
		return nil, s.syncDir(d.r)
	case err == nil && os.SameFile(fa, fn):
		// A rename done as a link and a removal (linkRename, off Linux),
		// to the private name or back, stopped between the two: one file
		// under both names. The path keeps it.
		if err := s.remove(d.r, a, false); err != nil {
			return nil, bare(err)
		}
		return nil, s.syncDir(d.r)
	}
	img, err := s.loadIn(ctx, d.r, a)
	if err != nil && !unreadable(err) {
		return nil, err
	}
	if err == nil && (img.same(e.pre) || img.same(e.post)) {
		if err := s.remove(d.r, a, false); err != nil {
			return nil, bare(err)
		}
		return nil, s.syncDir(d.r)
	}
	hidden := join(parentOf(e.rel), a)
	if !move {
		return nil, fmt.Errorf("%w: %s in the workspace folder, the file the interrupted change set aside under its private name for this path, holds neither image (an edit made meanwhile); Recover leaves it there, RecoverAround moves it to a visible name beside the path", ErrDiverged, hidden)
	}
	kept, err := s.keepVisible(d.r, e.rel, a)
	if err != nil {
		return nil, fmt.Errorf("%s in the workspace folder, the file the interrupted change set aside under its private name for this path, holds neither image and could not be moved to a visible name: %w", hidden, err)
	}
	return &keptFile{hidden: hidden, kept: kept}, s.syncDir(d.r)
}

// keptFile is a file set aside under the private name hidden and moved
// to the visible name kept (both relative).
type keptFile struct{ hidden, kept string }

func (k *keptFile) String() string {
	return fmt.Sprintf("the file the interrupted change set aside as %s was edited meanwhile (it holds neither image): moved to %s", k.hidden, Virtual(k.kept))
}

// keptStamp is the layout of the time in a kept file's name (keptName):
// UTC, with no character a file system refuses.
const keptStamp = "20060102T150405Z"

// keptName is the visible name beside rel, a relative path, of a file
// set aside for rel that is kept (it holds what no image of the change
// does, or it could not go back): rel's name with ".kept-" and the UTC
// time t put before its .txt or .md extension, or after the name where
// it has none, and "-n" after the time when n > 0 (the names before were
// taken): "notes.md" gives "notes.kept-20261127T184413Z.md". The name
// passes Normalize, so that a proposal can name it (a text file's can be
// read, replaced and deleted as any other): its stem is cut, at a
// boundary of Unicode normal form C, as needed to keep the name and the
// path within MaxNameBytes and MaxPathBytes.
func keptName(rel string, t time.Time, n int) string {
	dir, name := parentOf(rel), base(rel)
	stem, ext := name, ""
	if HasTextExt(name) {
		i := strings.LastIndexByte(name, '.')
		stem, ext = name[:i], name[i:]
	}
	tag := ".kept-" + t.UTC().Format(keptStamp)
	if n > 0 {
		tag += "-" + strconv.Itoa(n)
	}
	room := MaxPathBytes - len(Prefix)
	if dir != "" {
		room -= len(dir) + 1
	}
	room = min(room, MaxNameBytes) - len(tag) - len(ext)
	if len(stem) > room {
		cut := max(room, 0)
		for cut > 0 && (!utf8.RuneStart(stem[cut]) || norm.NFC.FirstBoundaryInString(stem[cut:]) != 0) {
			cut--
		}
		stem = stem[:cut]
	}
	if stem == "" {
		stem = "file"
	}
	return join(dir, stem+tag+ext)
}

// maxKeptTries bounds the names keepVisible tries for one file.
const maxKeptTries = 100

// keepVisible moves the file hidden, a private name in d set aside for
// rel, to the first free name of keptName (the time now, then numbered),
// and returns that name, relative. The rename never replaces a file (see
// renameAside). The file is then a workspace file like any other: listed,
// counted, and free for proposals to read, replace or delete.
func (s *Sandbox) keepVisible(d *os.Root, rel, hidden string) (string, error) {
	now := s.core.now()
	for n := range maxKeptTries {
		kept := keptName(rel, now, n)
		err := s.renameAside(d, hidden, base(kept))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		s.core.tally.forget() // a file counted in
		return kept, nil
	}
	return "", fmt.Errorf("%s and the %d names numbered after it are taken", Virtual(keptName(rel, now, 0)), maxKeptTries-1)
}

// keepOut moves the file set aside as a for rel to a visible name beside
// it (keepVisible), a closed first, and says, for an error, where it
// went; or, if it cannot, where it stays and what to do.
func (s *Sandbox) keepOut(d *os.Root, rel string, a *aside) string {
	a.close()
	kept, err := s.keepVisible(d, rel, a.name)
	if err != nil {
		return fmt.Sprintf("is left under its private name, as %s in the workspace folder, for it could not be moved to a visible name (%v): it bars every change of %s until it is moved; rename it by hand to a visible name, or remove it",
			join(parentOf(rel), a.name), err, Virtual(rel))
	}
	return fmt.Sprintf("is kept as %s (moved from its private name %s)", Virtual(kept), a.name)
}

// keepHolding takes out of steps, the deepest first, the removals of
// directories that hold something that stays (a path left as found,
// something else put there), reporting each to leave; going is updated.
func (s *Sandbox) keepHolding(ctx context.Context, op string, steps []entry, going map[string]bool, entries []entry,
	leave func(e entry, found Image, note string)) ([]entry, error) {
	depth := func(rel string) int { return strings.Count(rel, "/") }
	var dirs []entry
	for _, e := range steps {
		if e.pre.Kind == KindDir && e.post.Kind != KindDir {
			dirs = append(dirs, e)
		}
	}
	slices.SortStableFunc(dirs, func(a, b entry) int { return depth(b.rel) - depth(a.rel) })
	kept := make(map[string]bool)
	for _, d := range dirs {
		names, err := s.names(ctx, d.rel)
		if err != nil {
			return nil, opErr(op, d.rel, err)
		}
		for _, n := range names {
			if !going[join(d.rel, n)] {
				kept[d.rel], going[d.rel] = true, false
				i := slices.IndexFunc(entries, func(e entry) bool { return e.rel == d.rel })
				leave(entries[i], d.pre, fmt.Sprintf("holds %q", n))
				break
			}
		}
	}
	return slices.DeleteFunc(steps, func(e entry) bool { return kept[e.rel] }), nil
}

// names lists the directory rel, temporary files included.
func (s *Sandbox) names(ctx context.Context, rel string) ([]string, error) {
	d, err := s.openDir(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer d.close()
	f, err := d.r.Open(".")
	if err != nil {
		return nil, bare(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return names, bare(err)
}

// opKind is one step of a transition.
type opKind int

const (
	opUnlink opKind = iota
	opRmdir
	opMkdir
	opWrite
)

func (k opKind) String() string {
	return [...]string{"unlink", "rmdir", "mkdir", "write"}[k]
}

// op is one step on one path; img is what the path becomes (content for a
// write, mode for a mkdir), was what it must hold just before (for a write
// or an unlink: a file whose content is checked once more as it is
// replaced or removed, or absent). changed is the error of a path that
// does not: ErrChanged for a promotion, ErrDiverged for a rollback and
// for an undo. tmp, for a write, is the temporary file that Prepare wrote
// ahead with img's content (nil: write it now).
type op struct {
	kind    opKind
	rel     string
	img     Image
	was     Image
	changed error
	tmp     *tempFile
}

// plan orders the steps that take every path of steps from pre to post:
// files removed, directories removed deepest first, directories created
// shallowest first, files written. undo[i] reverses ops[i].
func plan(steps []entry) (ops, undo []op) {
	add := func(o, u op) { ops, undo = append(ops, o), append(undo, u) }
	absent := Image{Kind: KindAbsent}
	for _, e := range steps {
		if e.pre.Kind == KindFile && e.post.Kind != KindFile {
			add(op{kind: opUnlink, rel: e.rel, img: absent, was: e.pre}, op{kind: opWrite, rel: e.rel, img: e.pre, was: absent})
		}
	}
	depth := func(rel string) int { return strings.Count(rel, "/") }
	byDepth := slices.Clone(steps)
	slices.SortStableFunc(byDepth, func(a, b entry) int { return depth(b.rel) - depth(a.rel) })
	for _, e := range byDepth {
		if e.pre.Kind == KindDir && e.post.Kind != KindDir {
			add(op{kind: opRmdir, rel: e.rel, img: Image{Kind: KindAbsent}}, op{kind: opMkdir, rel: e.rel, img: e.pre})
		}
	}
	slices.Reverse(byDepth)
	for _, e := range byDepth {
		if e.post.Kind == KindDir && e.pre.Kind != KindDir {
			add(op{kind: opMkdir, rel: e.rel, img: e.post}, op{kind: opRmdir, rel: e.rel, img: Image{Kind: KindAbsent}})
		}
	}
	for _, e := range steps {
		if e.post.Kind == KindFile && !e.pre.same(e.post) {
			was := absent
			u := op{kind: opUnlink, rel: e.rel, img: absent, was: e.post}
			if e.pre.Kind == KindFile {
				was = e.pre
				u = op{kind: opWrite, rel: e.rel, img: e.pre, was: e.post}
			}
			add(op{kind: opWrite, rel: e.rel, img: e.post, was: was}, u)
		}
	}
	return ops, undo
}

// transition runs the plan of steps; if a step fails it undoes the steps
// done, in reverse, under a context that the deadline does not stop. A
// write of a path in temps renames the temporary file Prepare wrote.
func (s *Sandbox) transition(ctx context.Context, opName string, steps []entry, temps map[string]*tempFile) (err error) {
	s.changing()
	defer func() { s.applied(steps, err == nil) }()
	ops, undo := plan(steps)
	changed := ErrDiverged
	if opName == "promote" {
		changed = ErrChanged
	}
	for i := range ops {
		ops[i].changed, undo[i].changed = changed, ErrDiverged
		if ops[i].kind == opWrite {
			ops[i].tmp = temps[ops[i].rel]
		}
	}
	for i, o := range ops {
		applied := false
		err := alive(ctx)
		if err == nil && s.core.hooks.beforeOp != nil {
			err = s.core.hooks.beforeOp(o)
		}
		if err == nil {
			applied, err = s.do(ctx, o)
		}
		if err == nil {
			continue
		}
		err = opErr(opName, o.rel, err)
		// A step whose effect happened but whose directory sync failed is
		// undone too.
		last := i - 1
		if applied {
			last = i
		}
		bg := context.WithoutCancel(ctx)
		var undoErrs []error
		for j := last; j >= 0; j-- {
			if _, uerr := s.do(bg, undo[j]); uerr != nil {
				undoErrs = append(undoErrs, opErr("undo", undo[j].rel, uerr))
			}
		}
		if undoErrs != nil {
			return errors.Join(append([]error{ErrIncomplete, err}, undoErrs...)...)
		}
		return err
	}
	return nil
}

// do runs one step. Every step works in the open parent directory, on a
// single name: no path is resolved again between the checks and the act.
// applied reports whether the step's effect happened (it may have, and
// the error be the directory sync that follows).
func (s *Sandbox) do(ctx context.Context, o op) (applied bool, err error) {
	d, name, err := s.openParent(ctx, o.rel)
	if err != nil {
		return false, err
	}
	defer d.close()
	switch o.kind {
	case opWrite:
		err = s.writeIn(ctx, d.r, name, o)
	case opUnlink:
		if err = checkFile(d.r, name); err == nil {
			err = s.removeIn(ctx, d.r, name, o)
		}
	case opMkdir:
		err = bare(d.r.Mkdir(name, fs.FileMode(o.img.Mode)))
	case opRmdir:
		var fi fs.FileInfo
		if fi, err = d.r.Lstat(name); err != nil {
			err = bare(err)
		} else if !fi.IsDir() {
			err = ErrNotDir
		} else {
			err = bare(d.r.Remove(name))
		}
	}
	if err != nil {
		if o.kind == opWrite || o.kind == opUnlink {
			// A file set aside may have been put back (putBack, takeBack)
			// or removed (drop): made durable too, lest a power cut leave
			// it under its private name for a change that failed and that
			// no Recover will see again.
			s.syncDir(d.r)
		}
		return false, err
	}
	if err := s.syncDir(d.r); err != nil {
		return true, err
	}
	return true, nil
}

// exclusive bounds ctx by the action's time limit and takes the locks of
// a change of the workspace: this process's (core.mu) and the folder's,
// which the other processes sharing it take too (lockFolder). Then it
// runs the view's check (see Checked), whose error lets the locks go and
// is returned as it is. done lets them go, the newest first.
func (s *Sandbox) exclusive(ctx context.Context, op string) (_ context.Context, done func(), _ error) {
	ctx, cancel := s.bound(ctx)
	s.core.mu.Lock()
	unlock, err := s.lockFolder(ctx)
	if err != nil {
		s.core.mu.Unlock()
		cancel()
		return nil, nil, opErr(op, "", err)
	}
	done = func() { unlock(); s.core.mu.Unlock(); cancel() }
	if s.check != nil {
		if err := s.check(ctx); err != nil {
			done()
			return nil, nil, err
		}
	}
	return ctx, done, nil
}

// plainFile refuses what Lstat found that is not a regular file: a
// symbolic link (ErrSymlink), which os.Root would follow, a directory,
// a FIFO or a device (ErrNotRegular).
func plainFile(fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return ErrSymlink
	case !fi.Mode().IsRegular():
		return ErrNotRegular
	}
	return nil
}

// checkFile requires name in d to be absent or a regular file with one
// link: the sandbox never replaces or removes a symbolic link, a
// directory, or a file that has another name somewhere.
func checkFile(d *os.Root, name string) error {
	fi, err := d.Lstat(name)
	if err != nil {
		return bare(err)
	}
	if err := plainFile(fi); err != nil {
		return err
	}
	return singleLink(fi)
}

// writeIn writes o.img as name in d: a new temporary file (written now
// by writeTemp, or ahead by Prepare), then a rename to the name. The
// temporary file is removed if anything fails; once renamed or removed,
// its writer's lock is released.
//
// The name must still hold o.was. Where it held no file, the temporary
// file is renamed only if the name is still free: a file made there
// since the check is not written over (o.changed). Where it held a file,
// exchangeIn replaces it, or, where the file system cannot exchange two
// names, the file is set aside first (setAside), the temporary file
// renamed in (again only if the name is free), and the file set aside
// hashed once more before it is removed: a write to it through a
// descriptor opened earlier puts it back in place of the new image
// (o.changed).
func (s *Sandbox) writeIn(ctx context.Context, d *os.Root, name string, o op) (err error) {
	tmp := o.tmp
	defer func() {
		if tmp == nil {
			return
		}
		// Closed before it is removed: Windows may not remove an open
		// file.
		tmp.close()
		if err != nil && tmp.name != "" {
			s.remove(d, tmp.name, tmp.f != nil)
		}
		// Renamed or removed: nothing of its own is left for Discard to
		// remove (its last name may be a private one, asideName, that a
		// later change uses again).
		tmp.name = ""
	}()
	if err := checkFile(d, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if tmp == nil {
		if tmp, err = writeTemp(d, o.img); err != nil {
			return err
		}
	}
	if err := alive(ctx); err != nil {
		return err
	}
	if s.core.hooks.beforeRename != nil {
		if err := s.core.hooks.beforeRename(o.rel); err != nil {
			return err
		}
	}
	if o.was.Kind != KindFile {
		return s.renameIn(d, tmp.name, name, o)
	}
	if done, err := s.exchangeIn(ctx, d, name, tmp, o); done {
		return err
	}
	a, err := s.setAside(ctx, d, name, o)
	if err != nil {
		return err
	}
	if err := s.renameIn(d, tmp.name, name, o); err != nil {
		if errors.Is(err, o.changed) {
			// Made again since it was set aside: what is there now stays,
			// and the file set aside goes, as the maker's rename would
			// have taken it.
			return s.drop(ctx, d, a, o, err)
		}
		return s.putBack(d, o.rel, name, a, err)
	}
	tmp.name = ""
	if err := s.swapHook("in", o.rel); err != nil {
		return s.takeBack(d, o.rel, name, a, tmp, err)
	}
	if err := s.holds(ctx, a, o); err != nil {
		return s.takeBack(d, o.rel, name, a, tmp, err)
	}
	if err := s.removeAside(d, a, o); err != nil {
		return s.takeBack(d, o.rel, name, a, tmp, err)
	}
	return nil
}

// removeAside removes the file set aside once the step is done. If it
// cannot, the caller puts it back (takeBack, putBack): the step is
// undone, and a failed step leaves nothing under a private name.
func (s *Sandbox) removeAside(d *os.Root, a *aside, o op) error {
	a.close()
	if err := s.swapHook("remove", o.rel); err != nil {
		return err
	}
	return bare(s.remove(d, a.name, a.f != nil))
}

// exchangeIn replaces name, which must hold o.was, by the temporary file
// tmp in one step, so that the name is never empty: tmp is renamed to
// name's private name (asideName), the two names are exchanged, and the
// file that came out is checked (checkAside). If it is not o.was, the
// names are exchanged back (takeBack) and the error matches o.changed.
// done false: the file system cannot exchange two names, and nothing was
// done.
func (s *Sandbox) exchangeIn(ctx context.Context, d *os.Root, name string, tmp *tempFile, o op) (done bool, err error) {
	a := &aside{name: asideName(name)}
	if err := s.renameNoReplace(d, tmp.name, a.name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return true, leftAside(o, name)
		}
		return true, bare(err)
	}
	from := tmp.name
	tmp.name = a.name // the new image, until exchanged: removed on an error
	if err := s.exchange(d, a.name, name); err != nil {
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			if err := d.Rename(a.name, from); err != nil {
				return true, bare(err)
			}
			tmp.name = from
			return false, nil
		case errors.Is(err, fs.ErrNotExist):
			return true, fmt.Errorf("%w: removed", o.changed)
		}
		return true, bare(err)
	}
	tmp.name = "" // a.name is the file that was there: never removed on an error
	err = s.swapHook("aside", o.rel)
	if err == nil {
		err = s.swapHook("in", o.rel)
	}
	if err == nil {
		err = s.checkAside(ctx, d, a, o)
	}
	if err != nil {
		return true, s.takeBack(d, o.rel, name, a, tmp, err)
	}
	if err := s.removeAside(d, a, o); err != nil {
		return true, s.takeBack(d, o.rel, name, a, tmp, err)
	}
	return true, nil
}

// leftAside is the error (o.changed) of a change of name, the file of
// o.rel, whose private name is taken: by a file set aside by a change a
// crash interrupted, whose recovery has not run yet (it settles the file:
// puts it back, removes it, or, RecoverAround, moves it to a visible
// name). It says which file, and what to do.
func leftAside(o op, name string) error {
	return fmt.Errorf("%w: %s in the workspace folder, a file a change interrupted by a crash set aside under its private name for this path, is still there: recover that change first; if none is left to recover, rename the file by hand to a visible name, or remove it",
		o.changed, join(parentOf(o.rel), asideName(name)))
}

// removeIn removes the file name of d, which must hold o.was: set aside
// (setAside), checked, hashed once more, removed. A write to it through
// a descriptor opened earlier puts it back (o.changed).
func (s *Sandbox) removeIn(ctx context.Context, d *os.Root, name string, o op) error {
	a, err := s.setAside(ctx, d, name, o)
	if err != nil {
		return err
	}
	if err := s.swapHook("in", o.rel); err != nil {
		return s.putBack(d, o.rel, name, a, err)
	}
	if err := s.holds(ctx, a, o); err != nil {
		return s.putBack(d, o.rel, name, a, err)
	}
	if err := s.removeAside(d, a, o); err != nil {
		return s.putBack(d, o.rel, name, a, err)
	}
	return nil
}

// renameIn renames the temporary file tmp to name, unless name exists:
// o.changed.
func (s *Sandbox) renameIn(d *os.Root, tmp, name string, o op) error {
	err := s.renameNoReplace(d, tmp, name)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: made while it was written", o.changed)
	}
	return bare(err)
}

func (s *Sandbox) swapHook(step, rel string) error {
	if s.core.hooks.swap == nil {
		return nil
	}
	return s.core.hooks.swap(step, rel)
}

// asidePrefix starts the private names of files set aside (asideName).
// Sweep leaves them; Recover puts them back.
const asidePrefix = ReservedPrefix + "aside-"

// asideName is the private name, in its own directory, of the file name
// while it is replaced or removed: one per name, so that Recover finds
// it after a crash.
func asideName(name string) string {
	h := sha256.Sum256([]byte(name))
	return asidePrefix + hex.EncodeToString(h[:16])
}

// aside is a file of the workspace under its private name, open.
type aside struct {
	name string
	f    *os.File
}

func (a *aside) close() {
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
}

// setAside renames name in d to its private name and checks it
// (checkAside). The rename is one atomic step: whatever the name held at
// that instant (a file an editor renamed over it included) is what is
// checked, and nothing written to the name afterwards is touched. If the
// check fails, the file is put back and the error matches o.changed; a
// name that is gone is o.changed too.
func (s *Sandbox) setAside(ctx context.Context, d *os.Root, name string, o op) (*aside, error) {
	a := &aside{name: asideName(name)}
	if err := s.renameAside(d, name, a.name); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: removed", o.changed)
		case errors.Is(err, fs.ErrExist):
			return nil, leftAside(o, name)
		}
		return nil, bare(err)
	}
	err := s.swapHook("aside", o.rel)
	if err == nil {
		err = s.checkAside(ctx, d, a, o)
	}
	if err != nil {
		return nil, s.putBack(d, o.rel, name, a, err)
	}
	return a, nil
}

// checkAside opens the file set aside as a and checks that it is a
// regular file with one link holding o.was's content: o.changed if not.
func (s *Sandbox) checkAside(ctx context.Context, d *os.Root, a *aside, o op) error {
	fi, err := d.Lstat(a.name)
	if err != nil {
		return bare(err)
	}
	if err := plainFile(fi); err != nil {
		return changedBy(o.changed, err)
	}
	if err := singleLink(fi); err != nil {
		return changedBy(o.changed, err)
	}
	if a.f, err = d.OpenFile(a.name, os.O_RDONLY|openNonblock, 0); err != nil {
		return bare(err)
	}
	if got, err := a.f.Stat(); err != nil || !os.SameFile(fi, got) {
		return fmt.Errorf("%w: replaced while it was set aside", o.changed)
	}
	return s.holds(ctx, a, o)
}

// changedBy is changed (ErrChanged, ErrDiverged) for the reason why, an
// error of the package (ErrSymlink, ErrHardLink…): both match errors.Is,
// and the message names the package once ("sandbox: changed since
// staging: file has more than one hard link").
func changedBy(changed, why error) error {
	return &changedError{changed, why}
}

type changedError struct{ changed, why error }

func (e *changedError) Error() string {
	return e.changed.Error() + ": " + strings.TrimPrefix(e.why.Error(), "sandbox: ")
}

func (e *changedError) Unwrap() []error { return []error{e.changed, e.why} }

// holds checks that the file set aside holds o.was's content, reading it
// from its start through its descriptor: o.changed if not.
func (s *Sandbox) holds(ctx context.Context, a *aside, o op) error {
	h := sha256.New()
	r := io.NewSectionReader(a.f, 0, s.lim.MaxFileSize+1)
	buf := make([]byte, readChunk)
	var n int64
	for {
		if err := alive(ctx); err != nil {
			return err
		}
		k, err := r.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return bare(err)
		}
	}
	if n != o.was.Size || hex.EncodeToString(h.Sum(nil)) != o.was.SHA256 {
		return fmt.Errorf("%w: edited while it was replaced", o.changed)
	}
	return nil
}

// putBack renames the file set aside back to name, the file of rel,
// unless name was made again meanwhile: then it is moved to a visible
// name beside it (keepOut), which the error gives. It returns cause.
func (s *Sandbox) putBack(d *os.Root, rel, name string, a *aside, cause error) error {
	a.close()
	if err := s.renameNoReplace(d, a.name, name); err != nil {
		return fmt.Errorf("%w (the file it held could not go back: %v; it %s)", cause, bare(err), s.keepOut(d, rel, a))
	}
	return cause
}

// drop removes the file set aside, once hashed again and closed: a write
// through a descriptor since it was checked keeps it, moved to a visible
// name (keepOut), which the error gives. It returns cause.
func (s *Sandbox) drop(ctx context.Context, d *os.Root, a *aside, o op, cause error) error {
	err := s.holds(ctx, a, o)
	a.close() // before the removal: Windows may not remove an open file
	if err != nil {
		return fmt.Errorf("%w (the file it held is not the one checked: %v; it %s)", cause, strings.TrimPrefix(err.Error(), "sandbox: "), s.keepOut(d, o.rel, a))
	}
	if err := s.remove(d, a.name, a.f != nil); err != nil {
		return fmt.Errorf("%w (the file it held could not be removed: %v; it %s)", cause, bare(err), s.keepOut(d, o.rel, a))
	}
	return cause
}

// takeBack puts the file set aside back in place of the new image just
// renamed in (tmp's file) at name, the file of rel, and returns cause: in
// one step where the file system can exchange two names, then removing
// the new image only if it is what came out. Elsewhere, only if the name
// still holds the new image, by a rename over it. A file that cannot go
// back, or that came out and is not the new image, is moved to a visible
// name (keepOut), which the error gives. Both files are closed before
// either is renamed over or removed.
func (s *Sandbox) takeBack(d *os.Root, rel, name string, a *aside, tmp *tempFile, cause error) error {
	a.close()
	ours := func(n string) bool {
		fi, lerr := d.Lstat(n)
		mine, serr := tmp.f.Stat()
		return lerr == nil && serr == nil && os.SameFile(fi, mine)
	}
	err := s.exchange(d, a.name, name)
	if errors.Is(err, errors.ErrUnsupported) {
		in := ours(name)
		tmp.close()
		if !in {
			return fmt.Errorf("%w (the path was replaced meanwhile, so the file it held cannot go back; it %s)", cause, s.keepOut(d, rel, a))
		}
		err = d.Rename(a.name, name)
		if err == nil {
			return cause
		}
	}
	if err != nil {
		tmp.close()
		return fmt.Errorf("%w (the file it held could not go back: %v; it %s)", cause, bare(err), s.keepOut(d, rel, a))
	}
	out := ours(a.name)
	tmp.close() // before the removal: Windows may not remove an open file
	if !out {
		return fmt.Errorf("%w (what replaced the new image meanwhile %s)", cause, s.keepOut(d, rel, a))
	}
	if err := s.remove(d, a.name, tmp.f != nil); err != nil {
		return fmt.Errorf("%w (the new image, out again, could not be removed: %v; it %s)", cause, bare(err), s.keepOut(d, rel, a))
	}
	return cause
}

// renameNoReplace is the package's renameNoReplace, or linkRename where a
// test has the sandbox act as off Linux (hooks.portable).
func (s *Sandbox) renameNoReplace(d *os.Root, from, to string) error {
	if s.core.hooks.portable {
		return linkRename(d, from, to, s.core.hooks.linked)
	}
	return renameNoReplace(d, from, to)
}

// renameAside renames the workspace file from to its private name to,
// unless to exists (fs.ErrExist), in one atomic step. Where the system
// cannot rename without replacing (renameExcl), to is looked at first and
// a plain rename follows: only the sandbox makes private names, under its
// locks (where the folder is not locked, two processes promoting one path
// meet as an editor and a sandbox do). Never a link and the removal of
// from (linkRename): that would remove whatever an editor renamed over
// from between the two.
func (s *Sandbox) renameAside(d *os.Root, from, to string) error {
	err := errors.ErrUnsupported
	if !s.core.hooks.portable {
		err = renameExcl(d, from, to)
	}
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	if _, err := d.Lstat(to); err == nil {
		return fs.ErrExist
	} else if !errors.Is(err, fs.ErrNotExist) {
		return bare(err)
	}
	return bare(d.Rename(from, to))
}

// exchange is the package's exchange, or errors.ErrUnsupported where a
// test has the sandbox act as off Linux (hooks.portable).
func (s *Sandbox) exchange(d *os.Root, a, b string) error {
	if s.core.hooks.portable {
		return errors.ErrUnsupported
	}
	return exchange(d, a, b)
}

// linkRename is renameNoReplace by link(2), which fails if to exists,
// then the removal of from; for a moment the file has two names. Where
// the file system has no hard links either, the name is looked at first
// and the rename replaces what came in between. linked, if not nil, runs
// between the link and the removal (a test's failure point).
func linkRename(d *os.Root, from, to string, linked func(from, to string)) error {
	err := d.Link(from, to)
	switch {
	case err == nil:
		if linked != nil {
			linked(from, to)
		}
		return bare(d.Remove(from))
	case errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist):
		return bare(err)
	}
	if _, lerr := d.Lstat(to); lerr == nil {
		return fs.ErrExist
	}
	return bare(d.Rename(from, to))
}

// tempFile is a temporary file of the sandbox, open and locked by its
// writer (lockTemp) until close: Sweep, in this process or another on the
// same folder, removes only the temporary files no writer holds, those a
// crash left.
type tempFile struct {
	name string // "" once renamed or removed
	f    *os.File
}

// close releases the file and its lock; it may be called more than once.
func (t *tempFile) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

// errTempTaken: a sweep took the temporary file just created (it found it
// before its writer locked it, and removes it).
var errTempTaken = errors.New("sandbox: temporary file taken by a sweep")

// writeTemp writes img to a new temporary file in d (O_EXCL, which never
// follows a link), locked: its content, its mode, fsync. The caller
// closes it once renamed or removed; on an error nothing is left behind.
func writeTemp(d *os.Root, img Image) (*tempFile, error) {
	for try := 0; ; try++ {
		t, err := createTemp(d)
		if errors.Is(err, errTempTaken) && try < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		_, err = t.f.Write(img.Content)
		if err == nil {
			err = t.f.Chmod(fs.FileMode(img.Mode))
		}
		if err == nil {
			err = t.f.Sync()
		}
		if err != nil {
			t.close() // before the removal: Windows may not remove an open file
			d.Remove(t.name)
			return nil, bare(err)
		}
		return t, nil
	}
}

// createTemp creates a new temporary file in d and locks it. A sweep
// that found it before the lock removes it: errTempTaken.
func createTemp(d *os.Root) (*tempFile, error) {
	name, err := tempName()
	if err != nil {
		return nil, err
	}
	f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, bare(err)
	}
	t := &tempFile{name: name, f: f}
	err = lockTemp(f)
	if err == nil {
		// Locked, but perhaps after a sweep removed it.
		fi, lerr := d.Lstat(name)
		got, serr := f.Stat()
		if lerr != nil || serr != nil || !os.SameFile(fi, got) {
			err = errTempTaken
		}
	}
	if err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func tempName() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return ReservedPrefix + "tmp-" + hex.EncodeToString(b[:]), nil
}

// remove removes name from d; open says whether the sandbox still holds
// the file open (a test's hook checks it never does).
func (s *Sandbox) remove(d *os.Root, name string, open bool) error {
	if s.core.hooks.removing != nil {
		s.core.hooks.removing(name, open)
	}
	return d.Remove(name)
}

// syncDir makes a directory's new entries durable.
func (s *Sandbox) syncDir(d *os.Root) error {
	if s.core.hooks.syncDir != nil {
		if err := s.core.hooks.syncDir(); err != nil {
			return err
		}
	}
	f, err := d.Open(".")
	if err != nil {
		return bare(err)
	}
	defer f.Close()
	return bare(f.Sync())
}
