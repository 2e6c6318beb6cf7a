package sandbox

import (
	"context"
	"io/fs"
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

// tally is the workspace's running count, shared by every view of one
// sandbox. Without it every growing write would walk the whole tree, a
// cost that grows with the workspace (a tree of 100,000 directories made
// every write miss its deadline). The sandbox keeps it exact for every
// change it makes itself; what changes the folder from outside (an
// operator copying files in or removing them) is counted at the next
// Recount, which the caller runs outside the actions (the node, every
// minute). An action walks the tree only when there is no count: before
// the first one, after a change that failed half-way, or once the folder
// was made again.
type tally struct {
	mu    sync.Mutex
	known bool
	c     Counts
	// gen is bumped when a transition starts and when it ends (odd while
	// one runs): a walk is kept only if gen was even and stayed the same.
	gen uint64
}

// counts returns the running count, walking the tree first when there is
// none.
func (s *Sandbox) counts(ctx context.Context) (Counts, error) {
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

// recount walks the tree and keeps what it found as the running count,
// unless a change of the sandbox's ran meanwhile.
func (s *Sandbox) recount(ctx context.Context) (Counts, error) {
	t := &s.core.tally
	t.mu.Lock()
	gen := t.gen
	t.mu.Unlock()
	c, err := s.walkCounts(ctx)
	if err != nil {
		return Counts{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A change made during the walk may or may not be in what the walk
	// saw: the count stays as it was (exact for the sandbox's own
	// changes, or unknown, and the next check walks again).
	if t.gen == gen && gen%2 == 0 {
		t.known, t.c = true, c
	}
	return c, nil
}

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
// are called with core.mu held, so transitions do not overlap.
func (s *Sandbox) changing() {
	t := &s.core.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
}

// applied records the steps of a transition carried out in full (ok) or,
// when it failed part-way, forgets the count so that the next use walks
// the tree.
func (s *Sandbox) applied(steps []entry, ok bool) {
	t := &s.core.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	if !ok {
		t.known = false
		return
	}
	for _, e := range steps {
		t.c = t.c.add(e.pre, e.post)
	}
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
// while there is a count. A walk during which a promotion or rollback of
// this sandbox ran leaves the running count as it was (still exact for
// the sandbox's own changes); the Counts returned are then the walk's.
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
