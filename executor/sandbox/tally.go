package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// Counts is what the workspace holds: the bytes of its regular files (the
// figure MaxTotalBytes caps), its regular files and its directories (the
// root not counted).
type Counts struct {
	Bytes int64 `json:"bytes"`
	Files int64 `json:"files"`
	Dirs  int64 `json:"dirs"`
}

// add returns c changed by one path going from pre to post.
func (c Counts) add(pre, post Image) Counts {
	for sign, img := range [2]Image{pre, post} {
		d := int64(2*sign - 1) // -1 for pre, +1 for post
		switch img.Kind {
		case KindFile:
			c.Files += d
			c.Bytes += d * img.Size
		case KindDir:
			c.Dirs += d
		}
	}
	return c
}

// plus returns c and d added.
func (c Counts) plus(d Counts) Counts {
	return Counts{Bytes: c.Bytes + d.Bytes, Files: c.Files + d.Files, Dirs: c.Dirs + d.Dirs}
}

// most returns the larger of what pre and what post count, each figure
// apart: the most one path going from pre to post may add to a count
// that saw it in either image, or in neither (a file set aside).
func most(pre, post Image) Counts {
	a, b := Counts{}.add(Image{}, pre), Counts{}.add(Image{}, post)
	return Counts{Bytes: max(a.Bytes, b.Bytes), Files: max(a.Files, b.Files), Dirs: max(a.Dirs, b.Dirs)}
}

// tally is the workspace's running count, shared by every view of one
// sandbox. Without it every growing write would walk the whole tree, a
// cost that grows with the workspace (a tree of 100,000 directories made
// every write miss its deadline). The sandbox keeps it exact for every
// change it makes itself, a change that fails half-way included (each
// step done or undone is counted); what changes the folder from outside
// (an operator copying files in or removing them) is counted at the next
// Recount, which the caller runs outside the actions (the node, every
// minute). A file a recovery moves in or out of sight is counted as it
// moves (shift). An action walks the tree only when there is no count:
// before the first one, or once the folder was made again. Where the
// folder is shared with other processes (see CountFile), the count they
// share is the one checked, and the tally follows it.
type tally struct {
	mu    sync.Mutex
	known bool
	c     Counts
	// partial: c is what a walk cut short counted (see recount), a lower
	// bound, until a walk completes.
	partial bool
	// gen is bumped when a transition starts and when it ends (odd while
	// one runs).
	gen uint64
	// walks are the walks of the tree under way (recount): each
	// transition that ends during one adds to its grow what it may have
	// added that the walk did not see.
	walks map[*walking]bool
}

// walking is one walk of the tree that will become the running count.
type walking struct {
	grow Counts
	// ended is set when the walk ended while a transition ran: the
	// transition's end (applied) makes c, plus grow, the count.
	ended bool
	c     Counts
	// stale: the folder it walked is gone (forget); it is not kept.
	stale bool
}

// counts returns the running count, walking the tree first when there is
// none. Where the folder is shared (see CountFile), the count is the one
// in CountFile, and there is none when it is missing or unreadable.
// locked: the caller holds the folder lock (a promotion).
func (s *Sandbox) counts(ctx context.Context, locked bool) (Counts, error) {
	if s.core.shared.Load() {
		if c, ok := s.sharedCounts(locked); ok {
			return c, nil
		}
		if locked {
			return s.recountLocked(ctx)
		}
		return s.recount(ctx)
	}
	t := &s.core.tally
	t.mu.Lock()
	if t.known {
		c := t.c
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	return s.recount(ctx)
}

// recount walks the tree and keeps what it found as the running count.
// The sandbox's own changes may run during the walk (nothing holds them
// back: the walk may be long), and the walk may have seen each path they
// touched before or after the change: what each change may have added
// unseen (for each path, the larger of its two images) is added to what
// the walk found. The count kept is then never below what the workspace
// holds (a cap is never passed for a change the walk missed), and above
// it by no more than the images of the paths changed during the walk,
// until the next recount. A walk that ends while a change runs is kept
// once that change ends. Where the folder is shared, the changes of the
// other processes are added too, and the count kept in CountFile (see
// recountShared).
func (s *Sandbox) recount(ctx context.Context) (Counts, error) {
	t := &s.core.tally
	shared := s.core.shared.Load()
	var start countRecord
	var startOK bool
	if shared {
		start, startOK = s.readCount()
	}
	w := &walking{}
	t.mu.Lock()
	if t.walks == nil {
		t.walks = make(map[*walking]bool)
	}
	t.walks[w] = true
	t.mu.Unlock()
	c, err := s.walkCounts(ctx)
	if shared {
		if got, kept, err := s.recountShared(ctx, w, start, startOK, c, err); kept {
			return got, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.stale {
		return c, err
	}
	if err != nil {
		delete(t.walks, w)
		// Cut short (its time limit, a stop) with no complete count to
		// go on: what it counted is a lower bound, and the caps are
		// enforced with it rather than by a walk on each action's time.
		if ctx.Err() == nil || (t.known && !t.partial) || t.gen%2 == 1 {
			return Counts{}, err
		}
		c = c.plus(w.grow)
		if !t.known || c.Files+c.Dirs > t.c.Files+t.c.Dirs {
			t.known, t.partial, t.c = true, true, c
		}
		return t.c, fmt.Errorf("%w (%d files, %d folders, %d bytes): %w", ErrPartialCount, t.c.Files, t.c.Dirs, t.c.Bytes, err)
	}
	if t.gen%2 == 1 {
		w.ended, w.c = true, c
		return c, nil
	}
	delete(t.walks, w)
	t.known, t.partial, t.c = true, false, c.plus(w.grow)
	return c, nil
}

// ErrPartialCount: a walk that counts the workspace (Recount, Counts, or
// the first check of a cap) was cut short by its context while there
// was no complete count: what it counted became the running count, a
// lower bound, with which the caps are enforced until a walk completes.
// The error also carries the cause.
var ErrPartialCount = errors.New("sandbox: the workspace was counted in part, its walk cut short; the caps are enforced from that partial count until a count completes")

// walkCounts counts the tree by walking it.
func (s *Sandbox) walkCounts(ctx context.Context) (Counts, error) {
	var c Counts
	err := s.walk(ctx, func(_ string, fi fs.FileInfo) error {
		switch {
		case fi.Mode().IsRegular() && strings.HasPrefix(fi.Name(), ReservedPrefix):
			// A file written ahead of its promotion (Prepare), or left
			// by a crash for Sweep: not the workspace's, and the
			// promotion counts its content when it renames it.
		case fi.Mode().IsRegular():
			c.Files++
			c.Bytes += fi.Size()
		case fi.IsDir():
			c.Dirs++
		}
		return nil
	})
	return c, err
}

// changing marks a transition as started; applied marks it ended. Both
// are called with core.mu held, so transitions do not overlap, and with
// the folder lock where there is one (core.locked).
func (s *Sandbox) changing() {
	t := &s.core.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
}

// applied records the end of a transition of steps, done in full or
// not: delta is what the steps it did, and the undos it did of them,
// changed. The walks under way each add what the steps may have added
// unseen (see recount); a walk that ended while it ran becomes the count.
// Where the folder is shared, CountFile records it too.
func (s *Sandbox) applied(steps []entry, delta Counts) {
	var grow Counts
	for _, e := range steps {
		grow = grow.plus(most(e.pre, e.post))
	}
	if s.core.locked {
		defer s.shareChange(delta, grow)
	}
	t := &s.core.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.c = t.c.plus(delta)
	for w := range t.walks {
		w.grow = w.grow.plus(grow)
		if w.ended {
			delete(t.walks, w)
			t.known, t.partial, t.c = true, false, w.c.plus(w.grow)
		}
	}
}

// shift records a file the sandbox moved in or out of the workspace's
// count outside a transition (a file set aside by a crash that a
// recovery puts back or keeps under a visible name, or takes back):
// d is the file's counts, negative when it goes out. A walk under way
// may have seen it either way: it counts it in (see recount).
func (t *tally) shift(d Counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.c = t.c.plus(d)
	up := Counts{Bytes: max(d.Bytes, 0), Files: max(d.Files, 0), Dirs: max(d.Dirs, 0)}
	for w := range t.walks {
		w.grow = w.grow.plus(up)
	}
}

// moveCounted renames from to to in d (with rename) and records in the
// running count that the file enters it (in) or leaves it: a name of the
// sandbox's own (ReservedPrefix) is not counted, a visible one is. A
// file whose size cannot be told makes the count forgotten, as before
// (CountFile removed with it). Called under the locks of a change.
func (s *Sandbox) moveCounted(d *os.Root, from string, in bool, rename func() error) error {
	fi, lerr := d.Lstat(from)
	if err := rename(); err != nil {
		return err
	}
	t := &s.core.tally
	if lerr != nil || !fi.Mode().IsRegular() {
		t.forget()
		if s.core.locked {
			s.dropCount()
			s.forgetHeld()
		}
		return nil
	}
	c := Counts{Files: 1, Bytes: fi.Size()}
	if !in {
		c = Counts{Files: -1, Bytes: -fi.Size()}
	}
	t.shift(c)
	if s.core.locked {
		s.shareChange(c, Counts{Files: max(c.Files, 0), Bytes: max(c.Bytes, 0)})
	}
	return nil
}

// Counts returns what the workspace holds, from a walk of the whole tree
// bounded by MaxDuration, which also refreshes the running count the caps
// are checked with (see Recount).
func (s *Sandbox) Counts(ctx context.Context) (Counts, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.recount(ctx)
}

// Recount walks the whole tree, bounded by ctx alone, and makes what it
// finds the running count that Stage and Promote check MaxTotalBytes and
// MaxTotalEntries with, picking up what changed from outside the sandbox
// (files an operator copied in or removed). It is meant to run outside
// the actions, from time to time (the node runs it every minute): a walk
// costs time in proportion to the tree, and no Stage or Promote walks
// while there is a count. Promotions and rollbacks of this sandbox may
// run during the walk: the count kept adds what they may have added
// unseen (see recount), so it is never below what the workspace holds;
// where the folder is shared (see CountFile), so may those of the other
// processes, and the count is kept for them too, once the walk is done,
// under the folder lock (Recount waits for a promotion under way to end).
// The Counts returned are the walk's. A walk that ctx cuts short while
// there is no complete count yet keeps what it counted as the running
// count, a lower bound (see ErrPartialCount), and returns it.
func (s *Sandbox) Recount(ctx context.Context) (Counts, error) {
	return s.recount(ctx)
}

// Delta is how promoting st changes the workspace's counts: each touched
// path's post-image counted in, its pre-image counted out.
func (st *Staged) Delta() Counts {
	var c Counts
	for _, e := range st.entries {
		c = c.add(e.pre, e.post)
	}
	return c
}

// Delta is how the promotion snap records changed the workspace's counts;
// its rollback changes them by the opposite.
func (snap *Snapshot) Delta() Counts {
	var c Counts
	for _, e := range snap.Entries {
		c = c.add(e.Pre, e.Post)
	}
	return c
}
