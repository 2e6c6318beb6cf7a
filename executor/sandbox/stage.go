package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
)

// Modes of what the sandbox creates. A file it overwrites keeps its mode.
const (
	FileMode Perm = 0o644
	DirMode  Perm = 0o755
)

// Change is one effect to stage: a Write, Mkdir, Delete or Rename. Paths
// are virtual ("/sandbox/…") and go through Normalize.
type Change interface{ isChange() }

// Write creates the file Path or replaces its content. Path must end in
// .txt or .md and its parent must be a directory, unless Parents is set:
// then each missing directory above Path is created first, mode DirMode,
// as a touched path of its own (in Touched, the diffs and the snapshot,
// and removed again by a rollback). A file in the way is ErrNotDir.
type Write struct {
	Path    string
	Content []byte
	Parents bool
}

// Mkdir creates the directory Path, whose parent must be a directory.
type Mkdir struct{ Path string }

// Delete removes the file Path, which must end in .txt or .md.
// Directories are never deleted.
type Delete struct{ Path string }

// Rename moves the file From to To. Both must end in .txt or .md: a rename
// removes From, so it follows Delete's rule (a run.sh is neither deleted
// nor moved away). To must not exist: a rename never overwrites (delete
// the destination first, in the same Stage, to replace it). From must be a
// regular file; directories are not renamed.
type Rename struct{ From, To string }

func (Write) isChange()  {}
func (Mkdir) isChange()  {}
func (Delete) isChange() {}
func (Rename) isChange() {}

var (
	_ Change = Write{}
	_ Change = Mkdir{}
	_ Change = Delete{}
	_ Change = Rename{}
)

// Diff is what staging changes at one path. Text files (valid UTF-8
// without NUL on both sides) get a unified diff; for others, Binary is set
// and Before and After carry size and hash.
type Diff struct {
	Path    string `json:"path"` // virtual
	Before  Image  `json:"before"`
	After   Image  `json:"after"`
	Binary  bool   `json:"binary,omitempty"`
	Unified string `json:"unified,omitempty"`
}

// Staged is a set of changes judged against the sandbox as it was, not yet
// applied. Promote applies it.
type Staged struct {
	core    *core
	entries []entry // the touched paths, sorted
	diffs   []Diff
}

// entry is one touched path: its state before and after. pre has the
// content of a file; post has it for a file to write.
type entry struct {
	rel       string
	pre, post Image
}

// Touched returns the virtual paths the staged effects really change,
// sorted. A write of the content a file already has touches nothing.
func (st *Staged) Touched() []string {
	out := make([]string, len(st.entries))
	for i, e := range st.entries {
		out[i] = Virtual(e.rel)
	}
	return out
}

// Diffs returns one Diff per touched path, in the order of Touched.
func (st *Staged) Diffs() []Diff { return slices.Clone(st.diffs) }

// Within returns nil if every touched path is one of declared (virtual
// paths), or a *ScopeError listing the others. Declared paths are exact:
// nothing is expanded, so a pattern such as "/sandbox/*.log" matches only a
// file of that very name and a wider diff fails closed. A declared path
// that Normalize rejects is returned as its *PathError.
func (st *Staged) Within(declared []string) error {
	ok := make(map[string]bool, len(declared))
	for _, p := range declared {
		rel, err := Normalize(p)
		if err != nil {
			return err
		}
		ok[rel] = true
	}
	var wide []string
	for _, e := range st.entries {
		if !ok[e.rel] {
			wide = append(wide, Virtual(e.rel))
		}
	}
	if wide != nil {
		return &ScopeError{Undeclared: wide}
	}
	return nil
}

// Effects are declared effects by kind, as in an action descriptor.
type Effects struct {
	Create []string // paths that do not exist before and do after
	Modify []string // files whose content changes
	Delete []string // paths that exist before and do not after
}

// WithinEffects is Within with the kind of each effect checked too: a
// create must be declared as a create, and so on. A rename is a delete of
// its source and a create of its destination.
func (st *Staged) WithinEffects(declared Effects) error {
	sets := make(map[string]map[string]bool, 3)
	for kind, paths := range map[string][]string{"create": declared.Create, "modify": declared.Modify, "delete": declared.Delete} {
		sets[kind] = make(map[string]bool, len(paths))
		for _, p := range paths {
			rel, err := Normalize(p)
			if err != nil {
				return err
			}
			sets[kind][rel] = true
		}
	}
	var wide []string
	for _, e := range st.entries {
		ok := true
		switch {
		case e.pre.Kind == KindAbsent:
			ok = sets["create"][e.rel]
		case e.post.Kind == KindAbsent:
			ok = sets["delete"][e.rel]
		case e.pre.Kind == e.post.Kind:
			ok = sets["modify"][e.rel]
		default: // a file replaced by a directory or back: both
			ok = sets["delete"][e.rel] && sets["create"][e.rel]
		}
		if !ok {
			wide = append(wide, Virtual(e.rel))
		}
	}
	if wide != nil {
		return &ScopeError{Undeclared: wide}
	}
	return nil
}

// Snapshot returns the rollback snapshot of this staging: the pre-image of
// every touched path with its content, and the post-image. It is known
// before promotion, so a caller may store it durably first.
func (st *Staged) Snapshot() *Snapshot {
	snap := &Snapshot{Version: SnapshotVersion, Entries: make([]SnapshotEntry, len(st.entries))}
	for i, e := range st.entries {
		pre := e.pre
		pre.Content = slices.Clone(pre.Content)
		snap.Entries[i] = SnapshotEntry{Path: Virtual(e.rel), Pre: pre, Post: e.post.summary()}
	}
	return snap
}

// Stage judges changes, applied in order as one unit, against the sandbox
// as it is now, without touching it: it records the pre-image of every
// path involved, computes the post-images and one Diff per touched path,
// and checks the caps (file size, changes, total bytes, duration). Any
// change that cannot apply fails the whole Stage, with an error naming it.
func (s *Sandbox) Stage(ctx context.Context, changes []Change) (*Staged, error) {
	if len(changes) > s.lim.MaxChanges {
		return nil, &LimitError{Limit: LimitChanges, Max: int64(s.lim.MaxChanges), Got: int64(len(changes))}
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ov := &overlay{s: s, ctx: ctx, m: make(map[string]*entry)}
	for _, c := range changes {
		if err := ov.apply(c); err != nil {
			return nil, err
		}
	}
	st := &Staged{core: s.core}
	for _, e := range ov.m {
		if e.pre.same(e.post) {
			continue
		}
		st.entries = append(st.entries, *e)
	}
	slices.SortFunc(st.entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	if err := s.room(ctx, st.Delta(), false); err != nil {
		return nil, err
	}
	st.diffs = make([]Diff, len(st.entries))
	for i, e := range st.entries {
		if err := alive(ctx); err != nil {
			return nil, err
		}
		st.diffs[i] = diff(e)
	}
	return st, nil
}

// room checks that a change of the workspace's counts by delta keeps it
// within MaxTotalBytes and MaxTotalEntries: each is checked only when
// delta adds to it (a change that frees room always may). The running
// count answers, without a walk of the tree unless there is none (see
// counts): what changed from outside is counted at the next Recount.
// locked: the caller holds the folder lock (see counts).
func (s *Sandbox) room(ctx context.Context, delta Counts, locked bool) error {
	grow := delta.Files + delta.Dirs
	if delta.Bytes <= 0 && grow <= 0 {
		return nil
	}
	c, err := s.counts(ctx, locked)
	if err != nil {
		return err
	}
	if delta.Bytes > 0 && c.Bytes+delta.Bytes > s.lim.MaxTotalBytes {
		return &LimitError{Limit: LimitTotalBytes, Max: s.lim.MaxTotalBytes, Got: c.Bytes + delta.Bytes}
	}
	if n := c.Files + c.Dirs + grow; grow > 0 && n > s.lim.MaxTotalEntries {
		return &LimitError{Limit: LimitTotalEntries, Max: s.lim.MaxTotalEntries, Got: n}
	}
	return nil
}

// overlay is the sandbox as the changes staged so far leave it.
type overlay struct {
	s   *Sandbox
	ctx context.Context
	m   map[string]*entry
}

// get returns the entry of rel, loading its pre-image from disk the first
// time. A path under something that is not a directory on disk is absent
// on disk (its parent may become a directory in this Stage).
func (o *overlay) get(rel string) (*entry, error) {
	if e, ok := o.m[rel]; ok {
		return e, nil
	}
	var img Image
	if rel == "" {
		img = Image{Kind: KindDir}
	} else {
		parent, err := o.get(parentOf(rel))
		if err != nil {
			return nil, err
		}
		img = Image{Kind: KindAbsent}
		if parent.pre.Kind == KindDir {
			if img, err = o.s.load(o.ctx, rel); err != nil {
				return nil, opErr("stage", rel, err)
			}
		}
	}
	e := &entry{rel: rel, pre: img, post: img}
	o.m[rel] = e
	return e, nil
}

// parentDir checks that the parent of rel is a directory after the changes
// so far.
func (o *overlay) parentDir(rel string) error {
	if rel == "" {
		return nil
	}
	p, err := o.get(parentOf(rel))
	if err != nil {
		return err
	}
	switch p.post.Kind {
	case KindDir:
		return nil
	case KindAbsent:
		return opErr("stage", p.rel, fs.ErrNotExist)
	}
	return opErr("stage", p.rel, ErrNotDir)
}

// makeParents creates, in the overlay, each directory above rel that is
// absent after the changes so far, the shallowest first. It stops at the
// first one that is not absent: parentDir then judges it.
func (o *overlay) makeParents(rel string) error {
	var missing []*entry
	for p := parentOf(rel); p != ""; p = parentOf(p) {
		e, err := o.get(p)
		if err != nil {
			return err
		}
		if e.post.Kind != KindAbsent {
			break
		}
		missing = append(missing, e)
	}
	for _, e := range slices.Backward(missing) {
		if err := o.parentDir(e.rel); err != nil {
			return err
		}
		e.post = Image{Kind: KindDir, Mode: DirMode}
	}
	return nil
}

// fileAt returns the entry of rel, which must be a file after the changes
// so far.
func (o *overlay) fileAt(rel string) (*entry, error) {
	e, err := o.get(rel)
	if err != nil {
		return nil, err
	}
	switch e.post.Kind {
	case KindFile:
		return e, nil
	case KindAbsent:
		return nil, opErr("stage", rel, fs.ErrNotExist)
	}
	return nil, opErr("stage", rel, ErrNotRegular)
}

// child returns the entry of rel, whose parent must be a directory after
// the changes so far.
func (o *overlay) child(rel string) (*entry, error) {
	if err := o.parentDir(rel); err != nil {
		return nil, err
	}
	return o.get(rel)
}

// vacant returns the entry of rel, which a create (mkdir, rename target)
// needs absent, in a directory, after the changes so far.
func (o *overlay) vacant(rel string) (*entry, error) {
	e, err := o.child(rel)
	if err != nil {
		return nil, err
	}
	if e.post.Kind != KindAbsent {
		return nil, opErr("stage", rel, ErrExists)
	}
	return e, nil
}

func (o *overlay) apply(c Change) error {
	if err := alive(o.ctx); err != nil {
		return err
	}
	switch c := c.(type) {
	case Write:
		rel, err := o.textPath(c.Path)
		if err != nil {
			return err
		}
		if int64(len(c.Content)) > o.s.lim.MaxFileSize {
			return &LimitError{Limit: LimitFileSize, Path: Virtual(rel), Max: o.s.lim.MaxFileSize, Got: int64(len(c.Content))}
		}
		if c.Parents {
			if err := o.makeParents(rel); err != nil {
				return err
			}
		}
		e, err := o.child(rel)
		if err != nil {
			return err
		}
		mode := FileMode
		switch e.post.Kind {
		case KindDir:
			return opErr("stage", rel, ErrNotRegular)
		case KindFile:
			mode = e.post.Mode
		}
		e.post = fileImage(slices.Clone(c.Content), mode)
	case Mkdir:
		rel, err := Normalize(c.Path)
		if err != nil {
			return err
		}
		e, err := o.vacant(rel)
		if err != nil {
			return err
		}
		e.post = Image{Kind: KindDir, Mode: DirMode}
	case Delete:
		rel, err := o.textPath(c.Path)
		if err != nil {
			return err
		}
		e, err := o.fileAt(rel)
		if err != nil {
			return err
		}
		e.post = Image{Kind: KindAbsent}
	case Rename:
		from, err := o.textPath(c.From)
		if err != nil {
			return err
		}
		to, err := o.textPath(c.To)
		if err != nil {
			return err
		}
		src, err := o.fileAt(from)
		if err != nil {
			return err
		}
		dst, err := o.vacant(to)
		if err != nil {
			return err
		}
		dst.post = src.post
		src.post = Image{Kind: KindAbsent}
	default:
		return errors.New("sandbox: unknown change type")
	}
	return nil
}

// textPath normalizes p and requires the .txt/.md rule.
func (o *overlay) textPath(p string) (string, error) {
	rel, err := Normalize(p)
	if err != nil {
		return "", err
	}
	if !HasTextExt(rel) {
		return "", opErr("stage", rel, ErrNotText)
	}
	return rel, nil
}

func fileImage(content []byte, mode Perm) Image {
	sum := sha256.Sum256(content)
	return Image{Kind: KindFile, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Mode: mode, Content: content}
}

// isText reports whether content diffs as text.
func isText(b []byte) bool {
	return utf8.Valid(b) && !slices.Contains(b, 0)
}

func diff(e entry) Diff {
	d := Diff{Path: Virtual(e.rel), Before: e.pre.summary(), After: e.post.summary()}
	if e.pre.Kind != KindFile && e.post.Kind != KindFile {
		return d
	}
	if (e.pre.Kind == KindFile && !isText(e.pre.Content)) || (e.post.Kind == KindFile && !isText(e.post.Content)) {
		d.Binary = true
		return d
	}
	from, to := d.Path, d.Path
	var before, after string
	if e.pre.Kind == KindFile {
		before = string(e.pre.Content)
	} else {
		from = "/dev/null"
	}
	if e.post.Kind == KindFile {
		after = string(e.post.Content)
	} else {
		to = "/dev/null"
	}
	d.Unified = udiff.Unified(from, to, before, after)
	return d
}
