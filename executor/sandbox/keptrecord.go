package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// The record of the files kept. RecoverAround moves an edited file set
// aside to a visible name and says so in what it returns, which its
// caller then records in a database of its own, in a commit of its own.
// Should that commit fail, or the process stop before it, the next
// RecoverAround of the snapshot would find nothing set aside: it would
// take the path for one the crash never reached, put it back where the
// first one left it as found, and never name the kept file. So the names
// are written down first: before any file moves, RecoverAround writes,
// and syncs, the record of the snapshot (keptRecordName) with the names
// each file will take (pickKept); then it moves them. Whatever stops
// after that, the next RecoverAround of the snapshot reads the record
// and, where the private name is empty, leaves the path as found and
// names the kept file again, as the first one did. A file back under
// its private name (a move undone, or never made) is settled afresh.
//
// A record on disk cannot join the caller's commit, so it goes
// (ForgetKept) only once the caller has recorded the recovery. A crash
// between the two (or a commit that stood, its answer lost) leaves the
// record of a recovery done, which is never read again: it is the
// change's own (RecoverAroundFor), and a change once recorded recovered
// is not recovered again. Sweep leaves records, for it cannot tell such
// a one from the record of a change still to be recovered; the caller
// can, and ForgetKeptExcept removes the others. A record is never shown:
// its name starts with ReservedPrefix, which no path may name and List
// and the counts leave out.

// keptRecordPrefix starts the private name, at the workspace's root, of
// a record of the files kept (keptRecordName).
const keptRecordPrefix = ReservedPrefix + "kept-"

// keptRecordName is the private name of the record of the files a
// RecoverAroundFor of snap and id moves to visible names: one per change.
func keptRecordName(snap *Snapshot, id string) (string, error) {
	b, err := json.Marshal(struct {
		ID   string    `json:"id"`
		Snap *Snapshot `json:"snapshot"`
	}{id, snap})
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return keptRecordPrefix + hex.EncodeToString(h[:16]), nil
}

// keptEntry is a file set aside for the path Path, under the private
// name Hidden, that a recovery moves (or moved) to the visible name
// Kept: all relative.
type keptEntry struct {
	Path   string `json:"path"`
	Hidden string `json:"hidden"`
	Kept   string `json:"kept"`
}

func (k keptEntry) String() string {
	return (&keptFile{hidden: k.Hidden, kept: k.Kept}).String()
}

// readKept reads the record name, by path; none is no error. A record
// that cannot be read fails the recovery, naming it: what it says is the
// only trace of where the files it lists went.
func (s *Sandbox) readKept(ctx context.Context, name string, paths int) (map[string]keptEntry, error) {
	root, err := s.openDir(ctx, "")
	if err != nil {
		return nil, err
	}
	defer root.close()
	fi, err := root.r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	bad := func(err error) error {
		return fmt.Errorf("%s in the workspace folder, the record of the files an earlier recovery of this change moved to visible names, cannot be read (%w): move it out of the folder once you have read it, and recover again", name, err)
	}
	if err != nil {
		return nil, bad(bare(err))
	}
	if err := plainFile(fi); err != nil {
		return nil, bad(err)
	}
	if err := s.swapHook("record", name); err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO put there since the Lstat does not block the
	// open (under the folder lock); what is opened must be the file
	// looked at, a regular file still (never a link's target).
	f, err := root.r.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, bad(bare(err))
	}
	defer f.Close()
	if got, err := f.Stat(); err != nil {
		return nil, bad(bare(err))
	} else if !os.SameFile(fi, got) || !got.Mode().IsRegular() {
		return nil, bad(errors.New("replaced while it was opened"))
	}
	// Three relative paths an entry, each within MaxPathBytes, escaped.
	max := int64(paths)*(3*6*MaxPathBytes+64) + 2
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, bad(bare(err))
	}
	if int64(len(b)) > max {
		return nil, bad(fmt.Errorf("longer than %d bytes", max))
	}
	var list []keptEntry
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, bad(err)
	}
	out := make(map[string]keptEntry, len(list))
	for _, k := range list {
		out[k.Path] = k
	}
	return out, nil
}

// writeKept writes the record name with list, durably: a temporary file
// synced, renamed over it, the root synced.
func (s *Sandbox) writeKept(ctx context.Context, name string, list []keptEntry) error {
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	root, err := s.openDir(ctx, "")
	if err != nil {
		return err
	}
	defer root.close()
	t, err := writeTemp(root.r, Image{Content: b, Mode: 0o600})
	if err != nil {
		return fmt.Errorf("write the record of the files kept: %w", err)
	}
	defer t.close()
	if err := root.r.Rename(t.name, name); err != nil {
		t.close() // before the removal: Windows may not remove an open file
		root.r.Remove(t.name)
		return fmt.Errorf("write the record of the files kept: %w", bare(err))
	}
	return s.syncDir(root.r)
}

// ForgetKept removes what RecoverAroundFor of snap and id (RecoverAround:
// id "") keeps, once it has moved a file set aside to a visible name, so
// that a later one names it again (see Divergence.Kept) should the
// caller fail to record the first one's result: call it once that result
// is recorded. With nothing to remove it does nothing. A record left (the
// caller stopped, or this failed) is never read again but by a recovery
// of the same change: ForgetKeptExcept removes it.
func (s *Sandbox) ForgetKept(ctx context.Context, snap *Snapshot, id string) error {
	name, err := keptRecordName(snap, id)
	if err != nil {
		return err
	}
	ctx, done, err := s.exclusive(ctx, "recover")
	if err != nil {
		return err
	}
	defer done()
	if err := s.dropKept(ctx, name); err != nil {
		return opErr("recover", "", err)
	}
	return nil
}

// KeptOwner names a change whose record of the files kept must stay (see
// ForgetKeptExcept): the snapshot and id a RecoverAroundFor of it is
// given.
type KeptOwner struct {
	Snapshot *Snapshot
	ID       string
}

// ForgetKeptExcept removes the records of the files kept (see ForgetKept)
// of every change but those live returns, and returns how many it removed:
// those a caller that stopped, or whose ForgetKept failed, left behind.
// live must return every change the caller has yet to record recovered
// (an action still promoting or rolling back, whatever process will
// recover it). It is called holding the folder's lock, which every
// RecoverAroundFor holds while it writes a record: a record made before
// live reads the caller's state is judged on it, and none is made until
// the removal is done. Should live fail, nothing is removed. Call it at
// start-up, and after a ForgetKept failed or a caller's record of a
// recovery may have stood unseen.
func (s *Sandbox) ForgetKeptExcept(ctx context.Context, live func(context.Context) ([]KeptOwner, error)) (int, error) {
	ctx, done, err := s.exclusive(ctx, "recover")
	if err != nil {
		return 0, err
	}
	defer done()
	owners, err := live(ctx)
	if err != nil {
		return 0, err
	}
	keep := make(map[string]bool, len(owners))
	for _, o := range owners {
		name, err := keptRecordName(o.Snapshot, o.ID)
		if err != nil {
			return 0, err
		}
		keep[name] = true
	}
	root, err := s.openDir(ctx, "")
	if err != nil {
		return 0, opErr("recover", "", err)
	}
	defer root.close()
	stale, err := staleKept(ctx, root, keep)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range stale {
		if err := alive(ctx); err != nil {
			return n, err
		}
		fi, err := root.r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, opErr("recover", "", fmt.Errorf("%s: %w", name, bare(err)))
		}
		if !fi.Mode().IsRegular() {
			continue // not one the sandbox wrote
		}
		if err := s.remove(root.r, name, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, opErr("recover", "", fmt.Errorf("%s: %w", name, bare(err)))
		}
		n++
	}
	if n > 0 {
		if err := s.syncDir(root.r); err != nil {
			return n, opErr("recover", "", err)
		}
	}
	return n, nil
}

// staleKept returns the names of the records of the files kept at root
// that keep does not name. The root, which may hold many entries, is read
// listBatch names at a time: only those records are held. Nothing is
// removed while it is read (a directory changed as it is read may skip
// names).
func staleKept(ctx context.Context, root dir, keep map[string]bool) ([]string, error) {
	var stale []string
	readErr := func(err error) error { return opErr("recover", "", bare(err)) }
	err := eachName(ctx, root.r, readErr, func(name string) error {
		if isKeptRecord(name) && !keep[name] {
			stale = append(stale, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stale, nil
}

// isKeptRecord reports whether name is one keptRecordName gives.
func isKeptRecord(name string) bool {
	h, ok := strings.CutPrefix(name, keptRecordPrefix)
	if !ok || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// asideThere reports whether a file is set aside for rel (asideName).
func (s *Sandbox) asideThere(ctx context.Context, rel string) (bool, error) {
	d, name, err := s.openParent(ctx, rel)
	if err != nil {
		return false, nil // no folder to hold it
	}
	defer d.close()
	_, err = d.r.Lstat(asideName(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, bare(err)
	}
	return true, nil
}

// pickKept picks the visible name the file set aside for rel will be
// moved to: the first of keptName's (the time now, then numbered) that
// is free and not in taken (picked for another file of the same
// recovery).
func (s *Sandbox) pickKept(ctx context.Context, rel string, taken map[string]bool) (keptEntry, error) {
	d, name, err := s.openParent(ctx, rel)
	if err != nil {
		return keptEntry{}, err
	}
	defer d.close()
	kept, err := firstKeptName(rel, s.core.now(), func(kept string) (bool, error) {
		if taken[kept] {
			return false, nil
		}
		_, err := d.r.Lstat(base(kept))
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		return false, bare(err)
	})
	if err != nil {
		return keptEntry{}, err
	}
	return keptEntry{Path: rel, Hidden: join(parentOf(rel), asideName(name)), Kept: kept}, nil
}

// noKeptName is keepVisible's error where keptName gives no name for
// rel at try n.
func noKeptName(rel string, now time.Time, n int) error {
	if n > 0 {
		return fmt.Errorf("%s and the %d names numbered after it that are short enough are taken", Virtual(keptName(rel, now, 0)), n-1)
	}
	return fmt.Errorf("no visible name beside %s is short enough: its folders' names leave no room in the %d bytes of a path for %q and the time", Virtual(rel), MaxPathBytes, ".kept-")
}

// moveKept moves the file set aside k.Hidden to the name picked for it,
// k.Kept, durably, never over a file (renameAside): one made there since
// it was picked fails the move. A move done whose directory sync failed
// is returned with the error, for unkeep to undo.
func (s *Sandbox) moveKept(ctx context.Context, k keptEntry) (*keptFile, error) {
	d, _, err := s.openParent(ctx, k.Path)
	if err != nil {
		return nil, err
	}
	defer d.close()
	err = s.moveCounted(d.r, base(k.Hidden), true, func() error { return s.renameAside(d.r, base(k.Hidden), base(k.Kept)) })
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("%s was made while the recovery ran", Virtual(k.Kept))
	}
	if err != nil {
		return nil, fmt.Errorf("%s in the workspace folder, the file the interrupted change set aside under its private name for this path, holds neither image and could not be moved to a visible name: %w", k.Hidden, err)
	}
	return &keptFile{hidden: k.Hidden, kept: k.Kept}, s.syncDir(d.r)
}

// unkeepAll moves the files moved back to their private names (unkeep),
// the last first, when the recovery that moved them fails, and returns
// cause, with what could not go back. Once every one is back, the record
// is as it was before the recovery (prior; none if empty), which so
// changed nothing; otherwise it stays, naming those that did not.
func (s *Sandbox) unkeepAll(ctx context.Context, moved []*keptFile, record string, prior map[string]keptEntry, cause error) error {
	err := cause
	back := true
	for i := len(moved) - 1; i >= 0; i-- {
		var ok bool
		if err, ok = s.unkeep(ctx, moved[i], err); !ok {
			back = false
		}
	}
	if !back {
		return err
	}
	var rerr error
	if len(prior) == 0 {
		rerr = s.dropKept(ctx, record)
	} else {
		rerr = s.writeKept(ctx, record, slices.Collect(maps.Values(prior)))
	}
	if rerr != nil {
		return fmt.Errorf("%w (and the record of the files kept, %s, could not be put back as it was: %v)", err, record, rerr)
	}
	return err
}

// dropKept removes the record name, durably; none is no error.
func (s *Sandbox) dropKept(ctx context.Context, name string) error {
	root, err := s.openDir(ctx, "")
	if err != nil {
		return err
	}
	defer root.close()
	if err := s.remove(root.r, name, false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return bare(err)
	}
	return s.syncDir(root.r)
}
