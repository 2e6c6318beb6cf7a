package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/flock"
	"github.com/snapnode/snapnode/internal/syncdir"
)

// JournalName is the file Restore keeps in the data folder while it
// replaces the node's files, removed once every file is the backup's: a
// data folder that holds it is half restored, and a node does not start
// on it.
const JournalName = "restore-journal.json"

// asideSuffix precedes the time of a restore in the names of the files
// it replaced and kept: tasks.db.before-restore-20261125T101500Z.
const asideSuffix = ".before-restore-"

var (
	// ErrRunning: a node runs on the settings given to Restore (it holds
	// the data folder's lock, or its admin socket answers); nothing is
	// changed.
	ErrRunning = errors.New("backup: a node runs with this data folder")
	// ErrUnfinished: the data folder holds the journal of a restore that
	// was interrupted: Restore of another backup, and Run, are refused;
	// nothing is changed.
	ErrUnfinished = errors.New("backup: an earlier restore was interrupted")
)

// RestoreOptions tune Restore. The zero value is the default.
type RestoreOptions struct {
	// Now dates the names of the files kept aside (default time.Now).
	Now func() time.Time
	// Discard deletes the files the restore replaces (and the SQLite
	// -wal, -shm and -journal files beside a database) instead of
	// keeping them aside.
	Discard bool

	// afterStep, for tests, is called after each step of the
	// replacement ("journal"; "SOURCE kept", "SOURCE-wal aside"… within
	// a file's; "SOURCE" once it is in place); an error stops Restore
	// there, as a kill would, undoing nothing.
	afterStep func(step string) error
	// checkStep, for tests, is called after each step of Check (see
	// check).
	checkStep func(step string)
}

// Restored is what Restore did.
type Restored struct {
	Manifest *Manifest `json:"manifest"`
	// Files are the backup's files, each at its source.
	Files []RestoredFile `json:"files"`
	// Workspace is the sandbox folder, which is not in a backup and was
	// left as it is.
	Workspace string `json:"workspace"`
	// Finished: this restore finished one that was interrupted.
	Finished bool `json:"finished,omitempty"`
}

// States of a restored file.
const (
	StateReplaced  = "replaced"  // another file was there
	StateNew       = "new"       // no file was there
	StateUnchanged = "unchanged" // the file there was already the backup's
	// StateRemoved: the backup holds no such file (the node had none
	// when it was made), the node has one now: it is set aside (or
	// deleted with Discard), since it belongs to the state the backup
	// replaces: a record of seals the backup's audit log lacks, a relay
	// store or an agent name made since.
	StateRemoved = "removed"
)

// RestoredFile is one file Restore wrote, or found already restored.
type RestoredFile struct {
	Source string `json:"source"`
	Kind   string `json:"kind"`
	State  string `json:"state"`
	// Aside are the files the restore replaced, kept under new names in
	// the same folder: the file, then its SQLite -wal, -shm or -journal
	// files if it had any. Empty with Discard.
	Aside []string `json:"aside,omitempty"`
}

// journal is the data folder's JournalName while Restore replaces files.
type journal struct {
	Backup    string    `json:"backup"`
	StartedAt time.Time `json:"startedAt"`
	// Stamp is the time in the names of the files kept aside; a restore
	// that finishes this one keeps its files under the same names.
	Stamp string   `json:"stamp"`
	Files []string `json:"files"`
}

// Restore puts the backup in dir back for the node that cfg describes,
// which must not be running: ErrRunning, found by the lock a running node
// holds on its data folder (or, where the file system keeps no locks, by
// its admin socket answering). Restore holds that lock until it returns,
// so that no node starts meanwhile.
//
// It holds a shared lock on dir until it returns (ErrBusy while Run
// writes a backup there), first runs Check (ErrBad: nothing is changed)
// and copies every file of the backup next to its source (a temporary
// file in the same folder, 0600, its SHA-256 compared with the
// manifest's again and synced), so
// that a backup that cannot be read, or a full disk, changes nothing.
// Then, under a journal in the data folder (JournalName), it replaces
// each source in turn: the file there is kept aside (hard-linked, or
// renamed where links cannot be made, to NAME.before-restore-TIME; with
// Discard, deleted), and so are the -wal, -shm and -journal files of a
// database, before the new file is renamed into place (a write-ahead log
// left beside the restored database would be applied to it), and the
// folder is synced. The journal is removed last.
//
// A restore stopped midway (a kill, a power cut) leaves every source
// either the old file or the backup's, whole, and the journal: a node
// does not start on such a data folder, and Restore of the same backup
// finishes it (files already the backup's are left as they are); that of
// another backup is refused (ErrUnfinished).
//
// A PostgreSQL database is not restored (ErrPostgres); the workspace
// (sandbox_dir) is not in a backup and is left as it is.
func Restore(ctx context.Context, cfg config.Config, dir string, opts RestoreOptions) (*Restored, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.afterStep == nil {
		opts.afterStep = func(string) error { return nil }
	}
	if opts.checkStep == nil {
		opts.checkStep = func(string) {}
	}
	if _, err := databasePath(cfg); err != nil {
		return nil, err
	}
	backupDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("backup: data folder: %w", err)
	}
	unlock, err := lockNode(dataDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	journalPath := filepath.Join(dataDir, JournalName)
	prev, err := readJournal(journalPath)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.Backup != backupDir {
		return nil, fmt.Errorf("%w: %s says a restore of %s, started %s, stopped before it ended: some of the node's files may be that backup's, others not (those it replaced are kept as NAME%s%s). Restore %s again to finish it; to go back instead, put the files kept aside back and delete %s",
			ErrUnfinished, journalPath, prev.Backup, prev.StartedAt.Format(time.RFC3339), asideSuffix, prev.Stamp, prev.Backup, journalPath)
	}

	// The backup folder is read until every file is staged: a backup
	// being written into it is refused (ErrBusy), and none starts there.
	unlockBackup, err := lockBackup(dir, false)
	if err != nil {
		return nil, err
	}
	defer unlockBackup()
	m, err := check(ctx, cfg, dir, opts.checkStep)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer root.Close()

	j := journal{Backup: backupDir, StartedAt: opts.Now().UTC()}
	j.Stamp = j.StartedAt.Format(stampLayout)
	if prev != nil {
		j = *prev
		j.Files = nil // listed again below
	}
	res := &Restored{Manifest: m, Workspace: cfg.SandboxPath(), Finished: prev != nil}
	if abs, err := filepath.Abs(res.Workspace); err == nil {
		res.Workspace = abs
	}

	// Stage: every file next to its source, checked again and synced,
	// before any source changes.
	temps := make([]string, len(m.Files))
	defer func() {
		for _, t := range temps {
			if t != "" {
				os.Remove(t)
			}
		}
	}()
	for i, f := range m.Files {
		rf := RestoredFile{Source: f.Source, Kind: f.Kind}
		same, exists, err := alreadyRestored(f)
		switch {
		case err != nil:
			return nil, err
		case same:
			rf.State = StateUnchanged
		case exists:
			rf.State = StateReplaced
		default:
			rf.State = StateNew
		}
		if same && prev != nil {
			// Replaced by the interrupted run, which kept the old file.
			if rf.Aside = keptBefore(f, j.Stamp); len(rf.Aside) > 0 {
				rf.State = StateReplaced
			}
		}
		res.Files = append(res.Files, rf)
		if same {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f.Source), 0o700); err != nil {
			return nil, fmt.Errorf("backup: restore %s to %s: %w; nothing was changed", f.Name, f.Source, err)
		}
		temps[i] = tempName(f.Source)
		if err := stage(root, f, temps[i]); err != nil {
			return nil, err
		}
		if err := likeReplaced(f, temps[i]); err != nil {
			return nil, fmt.Errorf("backup: restore %s to %s: %w; nothing was changed", f.Name, f.Source, err)
		}
	}

	// The node's files of the kinds a backup holds when the node has
	// them, which this one does not: they go too.
	var extra []File
	if extra, err = notInBackup(cfg, m); err != nil {
		return nil, err
	}
	for _, f := range extra {
		res.Files = append(res.Files, RestoredFile{Source: f.Source, Kind: f.Kind, State: StateRemoved})
	}
	// The names the files replaced are kept under must be free, lest the
	// restore stop midway on one (a restore that finishes another finds
	// its own files there).
	if prev == nil && !opts.Discard {
		for i, f := range m.Files {
			if temps[i] != "" {
				if err := asideFree(f, j.Stamp); err != nil {
					return nil, err
				}
			}
		}
		for _, f := range extra {
			if err := asideFree(f, j.Stamp); err != nil {
				return nil, err
			}
		}
	}

	// Replace, under the journal.
	for _, f := range res.Files {
		j.Files = append(j.Files, f.Source)
	}
	if err := writeJournal(journalPath, &j); err != nil {
		return nil, err
	}
	if err := opts.afterStep("journal"); err != nil {
		return nil, err
	}
	for i, f := range m.Files {
		if temps[i] == "" {
			continue
		}
		rf := &res.Files[i]
		var err error
		if rf.Aside, err = replace(f, temps[i], j.Stamp, opts); err != nil {
			return nil, midway(err, journalPath)
		}
		temps[i] = ""
		if err := opts.afterStep(f.Source); err != nil {
			return nil, err
		}
	}
	for i, f := range extra {
		rf := &res.Files[len(m.Files)+i]
		var err error
		if rf.Aside, err = replace(f, "", j.Stamp, opts); err != nil {
			return nil, midway(err, journalPath)
		}
		if err := opts.afterStep(f.Source); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(journalPath); err != nil {
		return nil, midway(fmt.Errorf("backup: %w", err), journalPath)
	}
	if err := syncdir.Sync(dataDir); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return res, nil
}

// midway says of err, which stopped a restore after its journal was
// written, how to go on.
func midway(err error, journal string) error {
	return fmt.Errorf("%w; the restore stopped midway, each file the old one or the backup's, and %s says so: the node does not start until the same restore, run again, finishes it", err, journal)
}

// lockNode takes the lock a running node holds on its data folder (see
// node.Start), and refuses when the node's admin socket answers.
func lockNode(dataDir string) (unlock func() error, err error) {
	running := fmt.Errorf("%w: %s: stop it first (the node holds the folder's lock or answers on its admin socket)", ErrRunning, dataDir)
	unlock = func() error { return nil }
	if flock.Supported {
		f, err := os.Open(dataDir)
		if err != nil {
			return nil, fmt.Errorf("backup: data folder: %w", err)
		}
		switch err := flock.TryExclusive(f); {
		case err == nil, errors.Is(err, flock.ErrNoLocks):
			unlock = f.Close
		case errors.Is(err, flock.ErrHeld):
			f.Close()
			return nil, running
		default:
			f.Close()
			return nil, fmt.Errorf("backup: lock the data folder %s: %w", dataDir, err)
		}
	}
	// Where the file system keeps no locks, the admin socket: a node
	// answers on it once started (a socket a crash left refuses).
	if c, err := net.DialTimeout("unix", admin.Path(dataDir), 2*time.Second); err == nil {
		c.Close()
		unlock()
		return nil, running
	}
	return unlock, nil
}

// maxJournal bounds the journal readJournal reads.
const maxJournal = 1 << 20

// stampLayout formats the time in the names of the files a restore keeps
// aside.
const stampLayout = "20060102T150405Z"

// readJournal reads the journal at path; nil when there is none. Its
// stamp names files, so it must be a time as Restore writes it; a journal
// that is not a regular file of Restore's is refused (ErrUnfinished).
func readJournal(path string) (*journal, error) {
	bad := func(why error) error {
		return fmt.Errorf("%w: %s, the journal of a restore that stopped before it ended, cannot be read (%v): some of the node's files may be a backup's, others not; restore that backup again after deleting it", ErrUnfinished, path, why)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("backup: %w", err)
	case !fi.Mode().IsRegular():
		return nil, bad(fmt.Errorf("it is %s, not a regular file", what(fi.Mode())))
	case fi.Size() > maxJournal:
		return nil, bad(fmt.Errorf("it is over %d bytes", maxJournal))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, bad(err)
	}
	if j.Backup == "" || !filepath.IsAbs(j.Backup) || filepath.Clean(j.Backup) != j.Backup {
		return nil, bad(fmt.Errorf("the backup %q is not an absolute path", j.Backup))
	}
	if t, err := time.Parse(stampLayout, j.Stamp); err != nil || t.Format(stampLayout) != j.Stamp {
		return nil, bad(fmt.Errorf("the time %q is not one", j.Stamp))
	}
	return &j, nil
}

// writeJournal writes j at path atomically and syncs its folder.
func writeJournal(path string, j *journal) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("backup: journal: %w", err)
	}
	tmp := tempName(path)
	// A restore killed while it wrote the journal left its temporary file.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: journal: %w; nothing was changed", err)
	}
	if err := writeSynced(tmp, bytes.NewReader(append(b, '\n'))); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: journal: %w; nothing was changed", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: journal: %w", err)
	}
	if err := syncdir.Sync(filepath.Dir(path)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// tempName is the temporary file a restore writes path's new content
// into: in path's folder, so that the rename is atomic. A restore stopped
// before the rename leaves it, and the next one writes it again.
func tempName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".restoring")
}

// alreadyRestored tells whether f's source is already the backup's file
// (a restore finishing an interrupted one): a regular file of its size
// and sum and, for a database, without the -wal or -journal file of
// another. exists tells whether there is a file there at all; a folder
// there is an error.
func alreadyRestored(f File) (same, exists bool, err error) {
	fi, err := os.Lstat(f.Source)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("backup: %w", err)
	case fi.IsDir():
		return false, true, fmt.Errorf("backup: %s is a folder; the backup's %s goes there: move it away", f.Source, f.Name)
	case !fi.Mode().IsRegular() || fi.Size() != f.Size:
		return false, true, nil
	}
	if f.Kind == KindDatabase {
		for _, s := range sidecars {
			if _, err := os.Lstat(f.Source + s); err == nil {
				return false, true, nil
			}
		}
	}
	_, s, err := sum(f.Source)
	if err != nil {
		return false, true, err
	}
	return s == f.SHA256, true, nil
}

// sidecars are the files SQLite keeps beside a database.
var sidecars = []string{"-wal", "-shm", "-journal"}

// stage copies f from root to tmp (0600), checks its size and sum against
// the manifest's once more, and syncs it.
func stage(root *os.Root, f File, tmp string) error {
	in, err := root.Open(filepath.FromSlash(f.Name))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	if err := writeSynced(tmp, io.TeeReader(io.LimitReader(in, f.Size+1), h)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: restore %s to %s: %w; nothing was changed", f.Name, f.Source, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %s changed since it was checked (SHA-256 %s, the manifest says %s)", ErrBad, f.Name, got, f.SHA256)
	}
	return nil
}

// likeReplaced gives the staged tmp the owner of the file at f's source
// (of its folder when there is none) when the restore runs as root, so
// that the node's user opens it as before; and a policy or settings
// file the permissions of the one it replaces, less writes by others
// (the node's other files stay 0600). Synced.
func likeReplaced(f File, tmp string) error {
	ref, err := os.Lstat(f.Source)
	replaces := err == nil && ref.Mode().IsRegular()
	if !replaces {
		if ref, err = os.Stat(filepath.Dir(f.Source)); err != nil {
			return err
		}
	}
	if err := chownLike(tmp, ref); err != nil {
		return err
	}
	if replaces && (f.Kind == KindPolicy || f.Kind == KindConfig) {
		if err := os.Chmod(tmp, ref.Mode().Perm()&0o644); err != nil {
			return err
		}
	}
	t, err := os.Open(tmp)
	if err != nil {
		return err
	}
	return errors.Join(t.Sync(), t.Close())
}

// writeSynced writes in to the new file path (0600) and syncs it.
func writeSynced(path string, in io.Reader) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

// replace puts the staged tmp in place of f's source: the file there,
// and a database's -wal, -shm and -journal files, kept aside under the
// restore's stamp (or deleted with Discard) first; then the rename, and
// the folder synced. With tmp "", the source is only set aside. It
// returns the names of the files kept.
func replace(f File, tmp, stamp string, opts RestoreOptions) ([]string, error) {
	aside := f.Source + asideSuffix + stamp
	var kept []string
	if _, err := os.Lstat(f.Source); err == nil && !opts.Discard {
		if err := keep(f.Source, aside); err != nil {
			return nil, err
		}
		kept = append(kept, aside)
		if err := opts.afterStep(f.Source + " kept"); err != nil {
			return nil, err
		}
	}
	if f.Kind == KindDatabase {
		for _, s := range sidecars {
			old := f.Source + s
			if _, err := os.Lstat(old); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			var err error
			if opts.Discard {
				err = os.Remove(old)
			} else if _, serr := os.Lstat(aside + s); serr == nil {
				return nil, fmt.Errorf("backup: %s exists: the file %s would be kept under that name: move it away", aside+s, old)
			} else {
				err = os.Rename(old, aside+s)
				kept = append(kept, aside+s)
			}
			if err != nil {
				return nil, fmt.Errorf("backup: put %s aside before restoring %s: %w", old, f.Source, err)
			}
			if err := opts.afterStep(old + " aside"); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case tmp != "":
		if err := os.Rename(tmp, f.Source); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
	default: // only set aside (or deleted): its name goes
		if err := os.Remove(f.Source); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	if err := syncdir.Sync(filepath.Dir(f.Source)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return kept, nil
}

// keptBefore returns the files kept aside for f's source under stamp
// that are there.
func keptBefore(f File, stamp string) []string {
	names := []string{""}
	if f.Kind == KindDatabase {
		names = append(names, sidecars...)
	}
	var kept []string
	for _, s := range names {
		if aside := f.Source + asideSuffix + stamp + s; exists(aside) {
			kept = append(kept, aside)
		}
	}
	return kept
}

// asideFree tells whether the names replace would keep f's source (and
// a database's -wal, -shm and -journal files) under are free.
func asideFree(f File, stamp string) error {
	names := []string{""}
	if f.Kind == KindDatabase {
		names = append(names, sidecars...)
	}
	for _, s := range names {
		if _, err := os.Lstat(f.Source + s); err != nil {
			continue // nothing to keep
		}
		aside := f.Source + asideSuffix + stamp + s
		if _, err := os.Lstat(aside); err == nil {
			return fmt.Errorf("backup: %s exists: the file %s would be kept under that name: move it away; nothing was changed", aside, f.Source+s)
		}
	}
	return nil
}

// keep gives the file at path the name aside too, a hard link, so that
// path is never missing; where links cannot be made, it renames it. An
// aside that is already path's file (a restore finishing an interrupted
// one) is kept as it is; another file there is not replaced.
func keep(path, aside string) error {
	err := os.Link(path, aside)
	if err == nil {
		return nil
	}
	if a, serr := os.Lstat(aside); serr == nil {
		if p, perr := os.Lstat(path); perr == nil && os.SameFile(a, p) {
			return nil
		}
		return fmt.Errorf("backup: %s exists: the file %s would be kept under that name: move it away", aside, path)
	}
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("backup: keep %s aside: %w", path, err)
	}
	return nil
}

// notInBackup returns the files of the node that cfg describes, of the
// kinds a backup holds only when the node has them (its record of the
// last seal, relay.db, agent.id), that the node has and m does not list.
func notInBackup(cfg config.Config, m *Manifest) ([]File, error) {
	w, err := sourcesOf(cfg)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Source] = true
	}
	var extra []File
	for _, f := range []File{
		{Source: w.record, Kind: KindSealRecord},
		{Source: w.relay, Kind: KindDatabase},
		{Source: w.agentID, Kind: KindAgentID},
	} {
		if listed[f.Source] {
			continue
		}
		fi, err := os.Lstat(f.Source)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("backup: %w", err)
		case fi.IsDir():
			return nil, fmt.Errorf("backup: %s is a folder: move it away", f.Source)
		}
		extra = append(extra, f)
	}
	return extra, nil
}
