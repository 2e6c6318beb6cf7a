package sandbox

import (
	"errors"
	"os"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// SetTestHooks installs failure points for the tests of package
// sandbox_test: beforeOp runs before each step of a promotion or rollback
// (with the step's kind and virtual path), beforeRename once a temporary
// file is written and synced, before it is renamed over its target. It
// clears the other hooks, but not SetPortable.
func SetTestHooks(s *Sandbox, beforeOp func(kind, path string) error, beforeRename func(path string) error) {
	s.core.hooks = hooks{portable: s.core.hooks.portable}
	if beforeOp != nil {
		s.core.hooks.beforeOp = func(o op) error { return beforeOp(o.kind.String(), Virtual(o.rel)) }
	}
	if beforeRename != nil {
		s.core.hooks.beforeRename = func(rel string) error { return beforeRename(Virtual(rel)) }
	}
}

// SetSyncHook installs a failure point before each directory sync (after
// the step's effect is done).
func SetSyncHook(s *Sandbox, syncDir func() error) { s.core.hooks.syncDir = syncDir }

// SetWalkHook installs a hook called as a walk of the tree (a count, a
// sweep) comes to each path, before it looks at it (nil: none).
func SetWalkHook(s *Sandbox, visit func(path string)) {
	s.core.hooks.walk = nil
	if visit != nil {
		s.core.hooks.walk = func(rel string) { visit(Virtual(rel)) }
	}
}

// RunningCounts returns the running count without walking, and whether
// there is one.
func RunningCounts(s *Sandbox) (Counts, bool) {
	t := &s.core.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.c, t.known
}

// SetClock makes the sandbox read the time from now instead of the wall
// clock: kept files are named with it.
func SetClock(s *Sandbox, now func() time.Time) { s.core.now = now }

// SetLockHook installs a hook called each time a promotion or rollback
// finds the folder lock held by another process (or another Sandbox on
// the same folder) and waits.
func SetLockHook(s *Sandbox, busy func()) { s.core.hooks.lockBusy = busy }

// FolderLocks reports whether the folder lock is taken on this platform.
func FolderLocks() bool { return folderLocks }

// SetCaseInsensitive makes s act as on a file system that ignores letter
// case and Unicode normal form (macOS's and Windows' defaults, a Linux
// folder made with chattr +F): a name finds the entry whose name folds to
// the same, and a new entry keeps the spelling it was made with. The
// folder is probed again, as Open would.
func SetCaseInsensitive(s *Sandbox) {
	SetFoldingLookup(s)
	s.core.spelling.Store(s.probeFolds(s.core.ws.root))
}

// SetFoldingLookup is SetCaseInsensitive without the probe: the sandbox
// keeps what Open found of its folder, as if only a folder inside it (a
// file system mounted there) folded names.
func SetFoldingLookup(s *Sandbox) {
	s.core.hooks.lookup = func(d *os.Root, name string) string {
		if _, err := d.Lstat(name); err == nil {
			return name
		}
		f, err := d.Open(".")
		if err != nil {
			return name
		}
		defer f.Close()
		names, _ := f.Readdirnames(-1)
		for _, n := range names {
			if strings.EqualFold(norm.NFD.String(n), norm.NFD.String(name)) {
				return n
			}
		}
		return name
	}
}

// Folds reports whether s found that its folder's file system finds names
// under other spellings.
func Folds(s *Sandbox) bool { return s.core.spelling.Load().folds }

// SetSwapHook installs a hook at the points of replacing or removing a
// file that a hand edit could race: step "aside" once the file at path
// is renamed to its private name and before its content is checked, step
// "in" once the new image is renamed in (or, for a removal, the file
// checked) and before the file set aside is hashed again, and step
// "remove" before the file set aside is removed (an error there stands
// for the removal failing); and step "rmdir" once a directory to remove
// was looked at (Lstat) and before it is removed; and step "record" once
// the record of the files kept (at path) was looked at and before it is
// opened. A hook that panics stands for a crash there:
// nothing is undone.
func SetSwapHook(s *Sandbox, swap func(step, path string) error) {
	s.core.hooks.swap = func(step, rel string) error { return swap(step, Virtual(rel)) }
}

// AsideName is the private name a file named name is renamed to while it
// is replaced or removed.
func AsideName(name string) string { return asideName(name) }

// SetPortable has s replace and remove files as it does off Linux, with
// no renameat2: a rename that must not replace is a link and a removal,
// and a file is set aside before the new image goes in (the name is empty
// between the two) rather than exchanged with it.
func SetPortable(s *Sandbox) { s.core.hooks.portable = true }

// SetLinkHook installs a hook between the two steps of a rename that must
// not replace where the sandbox acts as off Linux (SetPortable): the
// link(2) from the name from to the name to, in one directory, is made,
// from is not yet removed.
func SetLinkHook(s *Sandbox, linked func(from, to string)) { s.core.hooks.linked = linked }

// KeptName is the visible name, beside rel, that a file set aside and
// kept is moved to at t; n > 0 for the nth taken.
func KeptName(rel string, t time.Time, n int) string { return keptName(rel, t, n) }

// SetRemoveHook installs a hook run before the sandbox removes a file of
// its own (set aside, or temporary), with its name and whether the
// sandbox still holds it open.
func SetRemoveHook(s *Sandbox, removing func(name string, open bool)) {
	s.core.hooks.removing = removing
}

// KeptRecordName is the private name, at the folder's root, of the record
// of the files a RecoverAroundFor of snap and id moves to visible names.
func KeptRecordName(snap *Snapshot, id string) string {
	name, err := keptRecordName(snap, id)
	if err != nil {
		panic(err)
	}
	return name
}

// ListBatch is how many names a listing reads from a directory at once.
const ListBatch = listBatch

// SharedCounts returns the count in CountFile, the one the processes
// sharing the folder check their caps with; an error when there is none.
func SharedCounts(s *Sandbox) (Counts, error) {
	r, ok := s.readCount()
	if !ok || !r.Known {
		return Counts{}, errors.New("no count in " + CountFile)
	}
	return r.Counts, nil
}

// SetUnshared makes s keep its count as where the folder is not locked
// (no CountFile), until a promotion takes the folder lock again.
func SetUnshared(s *Sandbox) { s.core.shared.Store(false) }
