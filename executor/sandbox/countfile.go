package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The count shared by the processes that open one folder. Replicas of a
// node share their workspace folder, and each process's running count
// (tally) sees only its own changes: a promotion of another process
// would be counted at the next Recount only, and several processes
// could each fill the room left, taking the workspace past MaxTotalBytes
// or MaxTotalEntries by about their number times that room. So where the
// folder is locked (lockFolder), the count is kept in CountFile too, in
// the folder's root: every promotion, rollback and recovery reads it and
// writes it, changed by what it did, under the folder lock it already
// holds; Stage reads it; a Recount writes what its walk found. A process
// that finds it missing, or holding anything but a count, counts the
// workspace again (as with no count at all) and writes it anew.
//
// A Recount walks without the lock (the walk may be long) while the
// other processes may change the folder: CountFile also adds up, in
// Grown, what every change since the file was made may have added that
// a walk under way did not see (for each path, the larger of its two
// images, see most). The walk reads Grown before it starts, and once it
// is done, holding the lock, adds what Grown gained meanwhile: the count
// kept is never below what the workspace holds, as within one process.
//
// The file is written to countTemp and renamed over CountFile: a reader
// finds the old count or the new one, never a part. It is not synced: a
// power cut may lose the last changes of it (or leave it empty, which
// makes the next check count again); the next Recount puts it right.

// CountFile is the name of the count shared by the processes that open
// the folder, a file in the root of the workspace folder that the
// sandbox writes and keeps (it is made again when it is missing). Like
// the folder lock, no proposal can name it (ReservedPrefix), List does
// not show it, the counts leave it out, and Sweep leaves it alone.
const CountFile = ReservedPrefix + "count"

// countTemp is the name CountFile is written under before it is renamed.
const countTemp = ReservedPrefix + "count-new"

// maxCountRecord bounds what is read of CountFile: a record is far less.
const maxCountRecord = 4096

// maxCountFigure bounds each figure of a record read (its counts and
// Grown): far above any workspace, and low enough that adding figures
// and a change's delta cannot wrap around to a negative total.
const maxCountFigure = 1 << 60

// plausible reports whether every figure of c is one a count can hold:
// none negative, none above maxCountFigure.
func (c Counts) plausible() bool {
	for _, n := range []int64{c.Bytes, c.Files, c.Dirs} {
		if n < 0 || n > maxCountFigure {
			return false
		}
	}
	return true
}

// countRecord is what CountFile holds.
type countRecord struct {
	Counts
	// Known: Counts counts the workspace (in part, when Partial). A
	// record a change made where there was none carries Grown only.
	Known   bool `json:"known"`
	Partial bool `json:"partial"`
	// Grown adds up, over the changes made since the record was (ID),
	// the most each may have added unseen by a walk under way.
	Grown Counts `json:"grown"`
	ID    string `json:"id"`
}

// newCountID returns the ID of a new record.
func newCountID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readCount reads CountFile; ok false when it is missing or holds
// anything but a count (the folder included, when it is missing): more
// than maxCountRecord bytes, no record, or a figure no count can hold
// (see plausible).
func (s *Sandbox) readCount() (r countRecord, ok bool) {
	root, err := s.core.ws.current()
	if err != nil {
		return countRecord{}, false
	}
	// The sandbox follows no link: one at the name (os.Root would
	// follow it inside the folder) could name a file a requester
	// writes. What is opened must be the regular file Lstat found;
	// O_NONBLOCK: a FIFO swapped in meanwhile does not block the open.
	lfi, err := root.Lstat(CountFile)
	if err != nil || !lfi.Mode().IsRegular() {
		return countRecord{}, false
	}
	f, err := root.OpenFile(CountFile, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return countRecord{}, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !os.SameFile(fi, lfi) {
		return countRecord{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCountRecord+1))
	if err != nil || len(b) > maxCountRecord {
		return countRecord{}, false
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return countRecord{}, false
	}
	if id, err := hex.DecodeString(r.ID); err != nil || len(id) != 16 {
		return countRecord{}, false
	}
	// A figure no count can hold (an edit by hand, a file damaged) is
	// no count: trusted, a negative one would loosen the caps, and a
	// huge one wrap a sum around to a negative.
	if !r.Counts.plausible() || !r.Grown.plausible() {
		return countRecord{}, false
	}
	return r, true
}

// heldCount is CountFile as read or written under the locks (core.held).
type heldCount struct {
	r     countRecord
	ok    bool // r is a record (false: none, or none readable)
	known bool // read or written since the locks were taken
}

// lockedCount is readCount for the holder of core.mu while it holds the
// folder lock (core.locked): the file is read once under the locks, and
// what the holder writes is remembered (see shareChange).
func (s *Sandbox) lockedCount() (countRecord, bool) {
	if !s.core.locked {
		return s.readCount()
	}
	h := &s.core.held
	if !h.known {
		h.r, h.ok = s.readCount()
		h.known = true
	}
	return h.r, h.ok
}

// forgetHeld makes the next lockedCount read CountFile again, once the
// holder of the locks wrote or removed it other than by shareChange.
func (s *Sandbox) forgetHeld() {
	if s.core.locked {
		s.core.held = heldCount{}
	}
}

// writeCount writes r to CountFile: to countTemp, then renamed over it.
// The caller holds the folder lock.
func (s *Sandbox) writeCount(r countRecord) error {
	root, err := s.core.ws.current()
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := root.OpenFile(countTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Left by a write that stopped half-way: never written into as
		// it is (it may be a link).
		if err := root.Remove(countTemp); err != nil {
			return bare(err)
		}
		f, err = root.OpenFile(countTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return bare(err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(countTemp, CountFile)
	}
	if err != nil {
		root.Remove(countTemp)
		return bare(err)
	}
	return nil
}

// dropCount removes CountFile, once it cannot be kept right: the next
// check, in any process, counts the workspace again.
func (s *Sandbox) dropCount() {
	if root, err := s.core.ws.current(); err == nil {
		root.Remove(CountFile)
	}
}

// shareChange records in CountFile a change of the workspace by delta
// that may have added grow unseen by a walk under way, and makes the
// running count the shared one. The caller holds the folder lock. A
// change that finds no record makes one that carries grow only (a walk
// under way adds it); one that cannot write it removes it.
func (s *Sandbox) shareChange(delta, grow Counts) {
	if delta == (Counts{}) && grow == (Counts{}) {
		return
	}
	r, ok := s.lockedCount()
	if !ok {
		r = countRecord{ID: newCountID()}
	}
	if r.Known {
		r.Counts = r.Counts.plus(delta)
		if !r.Counts.plausible() {
			// Below what the change took away: the count was wrong (an
			// edit by hand). None is kept; the next check counts again.
			r.Counts, r.Known, r.Partial = Counts{}, false, false
		}
	}
	r.Grown = r.Grown.plus(grow)
	if err := s.writeCount(r); err != nil {
		s.dropCount()
		s.forgetHeld()
		return
	}
	if s.core.locked {
		s.core.held = heldCount{r: r, ok: true, known: true}
	}
	if r.Known {
		s.core.tally.set(r.Counts, r.Partial)
	}
}

// set makes c the running count (partial: a lower bound).
func (t *tally) set(c Counts, partial bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known, t.partial, t.c = true, partial, c
}

// sharedCounts returns the count in CountFile, and makes it the running
// count; ok false when there is none. locked: the caller holds core.mu
// and the folder lock (see lockedCount).
func (s *Sandbox) sharedCounts(locked bool) (Counts, bool) {
	var r countRecord
	var ok bool
	if locked {
		r, ok = s.lockedCount()
	} else {
		r, ok = s.readCount()
	}
	if !ok || !r.Known {
		return Counts{}, false
	}
	s.core.tally.set(r.Counts, r.Partial)
	return r.Counts, true
}

// recountLocked is recount for a caller that holds the folder lock: no
// change runs during the walk, in any process.
func (s *Sandbox) recountLocked(ctx context.Context) (Counts, error) {
	c, err := s.walkCounts(ctx)
	end, ok := s.lockedCount()
	// keepShared writes the file, or removes it: read it again.
	defer s.forgetHeld()
	return s.keepShared(ctx, end, ok, c, c, err)
}

// recountShared ends a recount where the folder is shared: it takes the
// folder lock (for a walk cut short, with MaxDuration of its own) and
// keeps what the walk found, c, plus what the changes made meanwhile,
// in every process, may have added unseen (Grown since start). kept
// false: the file system keeps no locks after all; the caller keeps the
// count as where nothing is shared.
func (s *Sandbox) recountShared(ctx context.Context, w *walking, start countRecord, startOK bool, c Counts, werr error) (_ Counts, kept bool, _ error) {
	t := &s.core.tally
	drop := func() (stale bool, grow Counts) {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.walks, w)
		return w.stale, w.grow
	}
	if werr != nil && ctx.Err() == nil {
		drop()
		return Counts{}, true, werr
	}
	lctx := ctx
	if werr != nil {
		var cancel context.CancelFunc
		lctx, cancel = s.bound(context.WithoutCancel(ctx))
		defer cancel()
	}
	unlock, held, err := s.lockFolder(lctx)
	if err != nil {
		drop()
		return Counts{}, true, errors.Join(werr, fmt.Errorf("sandbox: keep the count: %w", err))
	}
	defer unlock()
	if !held {
		return Counts{}, false, nil
	}
	stale, own := drop()
	if stale {
		return c, true, werr
	}
	end, endOK := s.readCount()
	var grow Counts
	switch {
	case endOK && startOK && end.ID == start.ID:
		// Grown only adds up: a figure below its start (an edit by
		// hand) gained nothing, and takes nothing from the walk.
		grow = Counts{
			Bytes: max(end.Grown.Bytes-start.Grown.Bytes, 0),
			Files: max(end.Grown.Files-start.Grown.Files, 0),
			Dirs:  max(end.Grown.Dirs-start.Grown.Dirs, 0),
		}
	case endOK:
		// Made during the walk: all it adds up came after the start.
		grow = end.Grown
	default:
		// Removed during the walk: this process's changes are all that
		// can be told.
		grow = own
	}
	got, err := s.keepShared(ctx, end, endOK, c, c.plus(grow), werr)
	return got, true, err
}

// keepShared keeps c, what a walk found (walked) and what grew unseen,
// as the count in CountFile and the running count, with the folder lock
// held; end is what CountFile held then. A walk cut short (werr, ctx
// ended) is kept only where there is no complete count, as recount
// does.
func (s *Sandbox) keepShared(ctx context.Context, end countRecord, endOK bool, walked, c Counts, werr error) (Counts, error) {
	r := countRecord{Counts: c, Known: true, Grown: end.Grown, ID: end.ID}
	if !endOK {
		r.Grown, r.ID = Counts{}, newCountID()
	}
	if werr != nil {
		if ctx.Err() == nil || (endOK && end.Known && !end.Partial) {
			return Counts{}, werr
		}
		if endOK && end.Known && end.Files+end.Dirs > c.Files+c.Dirs {
			r.Counts = end.Counts
		}
		r.Partial = true
	}
	s.core.tally.set(r.Counts, r.Partial)
	if err := s.writeCount(r); err != nil {
		s.dropCount()
		return Counts{}, errors.Join(werr, fmt.Errorf("sandbox: write the count the processes sharing the folder read (%s): %w", CountFile, err))
	}
	if r.Partial {
		return r.Counts, fmt.Errorf("%w (%d files, %d folders, %d bytes): %w", ErrPartialCount, r.Files, r.Dirs, r.Bytes, werr)
	}
	return walked, nil
}
