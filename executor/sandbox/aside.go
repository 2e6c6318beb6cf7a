package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// What a change does with a file it replaces or removes, so that an edit
// made by hand meanwhile is kept (see the package doc, "Edits from
// outside"): the file is set aside under a private name (asideName),
// checked and hashed once more, and removed only if it still holds what
// the action was judged on; otherwise it is put back, or, where it
// cannot go back, kept under a visible name (keptName). Recover settles
// what a crash left set aside (unstash).

// unstash settles the file a crash left set aside (asideName) while the
// path of e was replaced or removed. Where the path is empty, the file
// goes back to it; where the path is the same file (a second link), the
// private name goes. Where the path holds a file again (the crash came
// after the new image went in), the file set aside goes if it holds one
// of e's images, which the snapshot keeps. Holding anything else (an
// edit made meanwhile), it stays: with keep set, hidden names it
// (relative), for the caller to move it to a visible name (moveKept)
// once nothing else can fail; otherwise the error matches ErrDiverged
// and names it.
func (s *Sandbox) unstash(ctx context.Context, e entry, keep bool) (hidden string, err error) {
	d, name, err := s.openParent(ctx, e.rel)
	if err != nil {
		return "", nil // no folder to hold it: load says what the path is
	}
	defer d.close()
	a := asideName(name)
	fa, err := d.r.Lstat(a)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		// Unreadable (EIO, EACCES): a file may be set aside there, which
		// a recovery that went on would leave hidden.
		return "", bare(err)
	}
	fn, err := d.r.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.moveCounted(d.r, a, true, func() error { return s.renameNoReplace(d.r, a, name) }); err != nil {
			return "", err
		}
		return "", s.syncDir(d.r)
	case err == nil && os.SameFile(fa, fn):
		// A rename done as a link and a removal (linkRename, off Linux),
		// to the private name or back, stopped between the two: one file
		// under both names. The path keeps it.
		if err := s.remove(d.r, a, false); err != nil {
			return "", bare(err)
		}
		return "", s.syncDir(d.r)
	}
	img, err := s.loadIn(ctx, d.r, a)
	if err != nil && !unreadable(err) {
		return "", err
	}
	if err == nil && (img.same(e.pre) || img.same(e.post)) {
		if err := s.remove(d.r, a, false); err != nil {
			return "", bare(err)
		}
		return "", s.syncDir(d.r)
	}
	hidden = join(parentOf(e.rel), a)
	if !keep {
		return "", fmt.Errorf("%w: %s in the workspace folder, the file the interrupted change set aside under its private name for this path, holds neither image (an edit made meanwhile); Recover leaves it there, RecoverAround moves it to a visible name beside the path", ErrDiverged, hidden)
	}
	return hidden, nil
}

// unkeep moves the file moveKept moved back to its private name, when
// the recovery that moved it fails later, and returns cause: the next
// recovery finds it there again and names it. If it cannot, the error
// says where it is, and back is false.
func (s *Sandbox) unkeep(ctx context.Context, k *keptFile, cause error) (_ error, back bool) {
	d, _, err := s.openParent(ctx, k.kept)
	if err == nil {
		defer d.close()
		if err = s.moveCounted(d.r, base(k.kept), false, func() error { return s.renameAside(d.r, base(k.kept), base(k.hidden)) }); err == nil {
			err = s.syncDir(d.r)
		}
	}
	if err != nil {
		return fmt.Errorf("%w (%s, and could not be moved back to its private name, %v)", cause, k, strings.TrimPrefix(err.Error(), "sandbox: ")), false
	}
	return cause, true
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
// path within MaxNameBytes and MaxPathBytes, down to nothing ("file"
// where there is room for it). Where the path's folders leave no room
// for the time and the extension, there is no such name: "".
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
	if room < 0 {
		return ""
	}
	if len(stem) > room {
		cut := room
		for cut > 0 && (!utf8.RuneStart(stem[cut]) || norm.NFC.FirstBoundaryInString(stem[cut:]) != 0) {
			cut--
		}
		stem = stem[:cut]
	}
	if stem == "" && room >= len("file") {
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
	kept, err := firstKeptName(rel, s.core.now(), func(kept string) (bool, error) {
		err := s.moveCounted(d, hidden, true, func() error { return s.renameAside(d, hidden, base(kept)) })
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return "", err
	}
	return kept, nil
}

// firstKeptName returns the first of keptName's names for rel at now (the
// time, then numbered) that take takes, and take's error, if any; or an
// error saying why none is left.
func firstKeptName(rel string, now time.Time, take func(kept string) (bool, error)) (string, error) {
	for n := range maxKeptTries {
		kept := keptName(rel, now, n)
		if kept == "" {
			return "", noKeptName(rel, now, n)
		}
		if ok, err := take(kept); ok || err != nil {
			return kept, err
		}
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
