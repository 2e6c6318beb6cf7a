package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
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
// stagings may have been promoted since this one was staged), and
// MaxTotalEntries: a *LimitError, and nothing applied. Then files are
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
	var delta Counts
	for i, e := range st.entries {
		cur, err := s.loadWas(ctx, e.rel, e.pre)
		if err != nil {
			return nil, opErr("promote", e.rel, err)
		}
		if !cur.same(e.pre) {
			return nil, opErr("promote", e.rel, ErrChanged)
		}
		steps[i] = entry{rel: e.rel, pre: cur, post: e.post}
		delta = delta.add(cur, e.post)
	}
	// Stage judged the room against the workspace as it was then; other
	// stagings may have been promoted since (other workers, other
	// replicas). Judged again under the locks, no two of this process fill
	// it past the cap; nor two of processes sharing the folder, where it
	// is locked: the count is then the one in CountFile, which every
	// change, in every process, writes under the folder lock. Where it is
	// not, another process's promotions count only from this process's
	// next Recount.
	if err := s.room(ctx, delta, s.core.locked); err != nil {
		return nil, err
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
	return s.restore(ctx, snap, false, nil, "")
}

// Recover is Rollback for a promotion that may have stopped half-way (a
// crash, or ErrIncomplete): each path may be in its post-image or already
// in its pre-image; any other state is ErrDiverged.
func (s *Sandbox) Recover(ctx context.Context, snap *Snapshot) error {
	return s.restore(ctx, snap, true, nil, "")
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
// nothing hidden is left to bar a later change of the path. That move is
// part of the all or none: made once every path is checked, undone if a
// step after it fails, so that the next RecoverAround finds the file
// again and names it. It is also recorded in the workspace folder,
// durably, before the file moves: should the caller fail to record what
// RecoverAround returned (its commit failed, the process stopped), the
// next RecoverAround of snap returns the same, the path left as found
// and the file named where it was moved, rather than taking the path
// for one the crash never reached. Call ForgetKept once the result is
// recorded (and ForgetKeptExcept at start-up, for a record a stop in
// between left).
func (s *Sandbox) RecoverAround(ctx context.Context, snap *Snapshot) ([]Divergence, error) {
	return s.RecoverAroundFor(ctx, snap, "")
}

// RecoverAroundFor is RecoverAround for the change the caller knows as
// id (its own name for it, an action's id): the record of the files it
// moves is id's, so that a later change with the very same snapshot,
// should the record of this one outlive it (see ForgetKept), is not
// taken for this one.
func (s *Sandbox) RecoverAroundFor(ctx context.Context, snap *Snapshot, id string) ([]Divergence, error) {
	left := []Divergence{}
	if err := s.restore(ctx, snap, true, &left, id); err != nil {
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
// rather than refused; the record of the files kept is id's.
func (s *Sandbox) restore(ctx context.Context, snap *Snapshot, partial bool, left *[]Divergence, id string) (err error) {
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
	// The files an earlier RecoverAround of snap moved to visible names
	// (see keptRecordName): its result may never have been recorded.
	var record string
	var prior map[string]keptEntry
	if left != nil {
		if record, err = keptRecordName(snap, id); err != nil {
			return err
		}
		if prior, err = s.readKept(ctx, record, len(entries)); err != nil {
			return opErr(op, "", err)
		}
	}
	// found is what a path whose edit is kept holds, left as it is: the
	// promotion's own image, where the crash came once it was in.
	found := func(e entry, k string) error {
		cur, err := s.load(ctx, e.rel)
		note := ""
		if unreadable(err) || errors.Is(err, ErrSpelling) || errors.Is(err, ErrNotDir) {
			cur, note = Image{}, strings.TrimPrefix(err.Error(), "sandbox: ")
		} else if err != nil {
			return opErr(op, e.rel, err)
		}
		if k != "" {
			note = strings.TrimPrefix(note+"; "+k, "; ")
		}
		*left = append(*left, Divergence{Path: Virtual(e.rel), Pre: e.pre.summary(), Post: e.post.summary(),
			Found: cur.summary(), Note: note})
		return nil
	}
	going := make(map[string]bool)
	var steps []entry
	var keeps []int // the divergences in *left whose file set aside is kept
	for _, e := range entries {
		if partial && (e.pre.Kind == KindFile || e.post.Kind == KindFile) {
			if k, ok := prior[e.rel]; ok {
				there, err := s.asideThere(ctx, e.rel)
				if err != nil {
					return opErr(op, e.rel, err)
				}
				if !there {
					// Moved by an earlier recovery whose result was
					// never recorded: left as found, as it left it.
					if err := found(e, k.String()); err != nil {
						return err
					}
					(*left)[len(*left)-1].Kept = Virtual(k.Kept)
					continue
				}
			}
			hidden, err := s.unstash(ctx, e, left != nil)
			if err != nil {
				return opErr(op, e.rel, err)
			}
			if hidden != "" {
				// The edit is kept (moved below, once nothing else can
				// fail), the path left as it is.
				if err := found(e, ""); err != nil {
					return err
				}
				keeps = append(keeps, len(*left)-1)
				continue
			}
		}
		// A folder it was in is something else now: gone with it.
		cur, err := s.loadWas(ctx, e.rel, e.pre)
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
	// Every path checked: the files set aside that are kept move to their
	// visible names now, and back if what follows fails, so that a
	// recovery that fails changes nothing and the next one names them.
	var moved []*keptFile
	if len(keeps) > 0 {
		if moved, err = s.keepAll(ctx, op, keeps, *left, record, prior); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil && moved != nil {
			err = s.unkeepAll(context.WithoutCancel(ctx), moved, record, prior, err)
		}
	}()
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

// keepAll moves the files set aside of the divergences left[i], i in
// keeps, to visible names, and sets their Kept and Note: it picks the
// names (pickKept), writes them in the record (with prior, what it
// held), then moves the files (moveKept). If one cannot
// be moved, those moved go back (unkeepAll) and the error says why.
func (s *Sandbox) keepAll(ctx context.Context, op string, keeps []int, left []Divergence, record string, prior map[string]keptEntry) (moved []*keptFile, err error) {
	taken := make(map[string]bool)
	picks := make([]keptEntry, 0, len(keeps))
	for _, i := range keeps {
		rel := strings.TrimPrefix(left[i].Path, Prefix)
		k, err := s.pickKept(ctx, rel, taken)
		if err != nil {
			return nil, opErr(op, rel, fmt.Errorf("%s in the workspace folder, the file the interrupted change set aside under its private name for this path, holds neither image and could not be moved to a visible name: %w",
				join(parentOf(rel), asideName(base(rel))), err))
		}
		taken[k.Kept] = true
		picks = append(picks, k)
	}
	// The record keeps what it held (a file it lists that is set aside
	// again is settled afresh, and its entry goes with the new one).
	list := slices.Clone(picks)
	for rel, k := range prior {
		if !slices.ContainsFunc(picks, func(p keptEntry) bool { return p.Path == rel }) {
			list = append(list, k)
		}
	}
	if err := s.writeKept(ctx, record, list); err != nil {
		return nil, opErr(op, "", err)
	}
	for n, i := range keeps {
		l := &left[i]
		k, err := s.moveKept(ctx, picks[n])
		if k != nil {
			moved = append(moved, k)
			l.Kept = Virtual(k.kept)
			l.Note = strings.TrimPrefix(l.Note+"; "+k.String(), "; ")
		}
		if err != nil {
			return nil, s.unkeepAll(context.WithoutCancel(ctx), moved, record, prior, opErr(op, picks[n].Path, err))
		}
	}
	return moved, nil
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

// loadWas is load for a path whose image was was: a path that was
// absent is absent still below a folder that is a file now (a change
// that deletes a file and makes a folder at its name, with files in it,
// is staged with their paths absent below the file), not ErrNotDir.
func (s *Sandbox) loadWas(ctx context.Context, rel string, was Image) (Image, error) {
	img, err := s.load(ctx, rel)
	if errors.Is(err, ErrNotDir) && was.Kind == KindAbsent {
		return Image{Kind: KindAbsent}, nil
	}
	return img, err
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

// delta is how the step changes the workspace's counts, once done.
func (o op) delta() Counts {
	switch o.kind {
	case opUnlink:
		return Counts{}.add(o.was, Image{Kind: KindAbsent})
	case opRmdir:
		return Counts{Dirs: -1}
	case opMkdir:
		return Counts{Dirs: 1}
	default: // opWrite
		return Counts{}.add(o.was, o.img)
	}
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
	// What the steps done and the undos done changed, counted as they
	// are done: exact whether the transition succeeds, is undone, or
	// stops half-way (ErrIncomplete).
	var delta Counts
	defer func() { s.applied(steps, delta) }()
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
		if applied {
			delta = delta.plus(o.delta())
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
			done, uerr := s.do(bg, undo[j])
			if done {
				delta = delta.plus(undo[j].delta())
			}
			if uerr != nil {
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
			err = changedBy(o.changed, ErrNotDir)
		} else if err = s.swapHook("rmdir", o.rel); err == nil {
			// Only a directory goes: a file or a link put at the name
			// since the Lstat stays.
			if err = rmdirIn(d.r, name); errors.Is(err, ErrNotDir) {
				err = changedBy(o.changed, err)
			}
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
	unlock, held, err := s.lockFolder(ctx)
	if err != nil {
		s.core.mu.Unlock()
		cancel()
		return nil, nil, opErr(op, "", err)
	}
	s.core.locked = held
	done = func() {
		s.core.locked, s.core.held = false, heldCount{}
		unlock()
		s.core.mu.Unlock()
		cancel()
	}
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
