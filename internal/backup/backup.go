package backup

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	_ "modernc.org/sqlite" // the pure-Go "sqlite" driver

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/readfile"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/syncdir"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// ManifestName is the manifest's file name in a backup folder.
const ManifestName = "manifest.json"

// Format is the version of the manifest's layout.
const Format = 1

var (
	// ErrPostgres: the node's database is PostgreSQL, which this package
	// does not copy; pg_dump does, consistently, while the nodes run.
	ErrPostgres = errors.New("backup: the database is PostgreSQL: copy it with pg_dump")
	// ErrMemory: the node keeps its tasks in memory; there is nothing to
	// copy.
	ErrMemory = errors.New("backup: the database is memory: the node keeps no tasks to copy")
	// ErrNotEmpty: the output folder already holds files; a backup never
	// mixes with or overwrites other files.
	ErrNotEmpty = errors.New("backup: the output folder is not empty")
	// ErrBusy: a backup is being written into the folder (by Run); or,
	// to Run, a check or restore reads it. Nothing is changed.
	ErrBusy = errors.New("backup: the backup folder is in use")
	// ErrNoDatabase: the settings name no existing task database (a wrong
	// data folder); nothing is created.
	ErrNoDatabase = sqldb.ErrNoDatabase
)

// Kinds of files in a backup.
const (
	KindDatabase = "database" // a SQLite database, copied with VACUUM INTO
	KindKey      = "key"      // the identity's secret key file
	KindPolicy   = "policy"   // the Cedar policy file
	KindConfig   = "config"   // the TOML configuration file
	KindAgentID  = "agent-id" // the name of this node in the agent's job leases
	// KindSealRecord: the node's record of the last seal it wrote on its
	// audit log (audit-seal.json), copied before the database so that
	// the copy's chain holds that seal or a later one.
	KindSealRecord = "seal-record"
)

// Manifest describes a backup folder; it is its manifest.json.
type Manifest struct {
	Format    int       `json:"format"`
	CreatedAt time.Time `json:"createdAt"`
	// Address is the node's P2TR address.
	Address string `json:"address"`
	// KeyInEnvironment: the node's key is SNAPNODE_KEY, not a file;
	// it is not in the backup.
	KeyInEnvironment bool `json:"keyInEnvironment,omitempty"`
	// Audit is the head of the audit log in the copy: its last entry's
	// sequence number and hash, for `snapnode audit verify` to compare.
	Audit audit.Anchor `json:"audit"`
	// AuditEntries is how many entries the copy's chain holds.
	AuditEntries int64  `json:"auditEntries"`
	Files        []File `json:"files"`
}

// File is one file of a backup.
type File struct {
	// Name is the file's path in the backup folder.
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Source is the absolute path the node reads it from: where a restore
	// puts it back.
	Source string `json:"source"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Options tune Run. The zero value is the default.
type Options struct {
	// Now dates the manifest (default time.Now).
	Now func() time.Time

	// step, for tests, is called once the output folder is ready
	// ("out"), before anything is copied into it.
	step func(string)
}

// source is a file to copy: from where, under which name, how.
type source struct {
	path, name, kind string
	optional         bool // skipped when it does not exist
}

// databasePath is the path of the SQLite task database of the node that
// cfg describes: ErrMemory or ErrPostgres where there is none to copy.
func databasePath(cfg config.Config) (string, error) {
	dsn := cfg.DatabaseDSN()
	if dsn == config.MemoryDatabase {
		return "", ErrMemory
	}
	dialect, dbPath, err := sqldb.Target(dsn)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if dialect == sqldb.Postgres {
		return "", ErrPostgres
	}
	return dbPath, nil
}

// Run copies the state of the node that cfg describes into the folder
// out, creating it (0700) if needed, and returns the manifest it wrote
// there. out must be empty or missing: ErrNotEmpty otherwise. The node
// may be running: see the package comment. On an error the files Run
// wrote are removed.
func Run(ctx context.Context, cfg config.Config, out string, opts Options) (_ *Manifest, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.step == nil {
		opts.step = func(string) {}
	}
	dbPath, err := databasePath(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkOut(out); err != nil {
		return nil, err
	}
	// A restore stopped midway left some of the node's files the
	// backup's, others not: a backup of them would pass for sound.
	if j := filepath.Join(cfg.DataDir, JournalName); exists(j) {
		return nil, fmt.Errorf("%w: %s: a restore (snapnode backup --restore) stopped before it ended, some of the node's files the backup's, others not: run the same restore again to finish it before making a backup", ErrUnfinished, j)
	}
	if _, err := os.Stat(dbPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s", ErrNoDatabase, dbPath)
		}
		return nil, fmt.Errorf("backup: %w", err)
	}

	m := &Manifest{Format: Format}
	// The key first: the address is in the manifest, and a node whose key
	// cannot be read is not backed up half.
	var sources []source
	if k, err := identity.FromEnv(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	} else if k != nil {
		m.KeyInEnvironment = true
		m.Address = k.Address(network(cfg))
	} else {
		k, err := identity.LoadKeyFile(cfg.KeyPath())
		if err != nil {
			return nil, fmt.Errorf("backup: identity key: %w", err)
		}
		m.Address = k.Address(network(cfg))
		sources = append(sources, source{path: cfg.KeyPath(), name: "identity.key", kind: KindKey})
	}
	// The relay checkpoint is in the task database, the relay's events are
	// copied after it: at worst a restored node reads again, from its
	// relay, requests that its task database already holds (its replay
	// records recognise them); it never skips one that the copy lacks.
	// The record of the last seal before the database: the copy's chain
	// then holds that seal, or a later one the node wrote meanwhile (a
	// record older than the chain, which a restored node accepts).
	sources = append(sources,
		source{path: cfg.SealRecordPath(), name: "audit-seal.json", kind: KindSealRecord, optional: true},
		source{path: dbPath, name: "tasks.db", kind: KindDatabase},
		source{path: filepath.Join(cfg.DataDir, "relay.db"), name: "relay.db", kind: KindDatabase, optional: true},
		source{path: filepath.Join(cfg.DataDir, "agent.id"), name: "agent.id", kind: KindAgentID, optional: true},
	)
	if cfg.Policy != "" {
		sources = append(sources, source{path: cfg.Policy, name: "policy.cedar", kind: KindPolicy})
	}
	if cfg.ConfigFile != "" {
		sources = append(sources, source{path: cfg.ConfigFile, name: "snapnode.toml", kind: KindConfig})
	}
	if err := nameSources(cfg.DataDir, sources); err != nil {
		return nil, err
	}
	var tasksName, recordName string
	for _, s := range sources {
		switch s.path {
		case dbPath:
			tasksName = s.name
		case cfg.SealRecordPath():
			recordName = s.name
		}
	}

	created, err := prepareOut(out)
	if err != nil {
		return nil, err
	}
	// Only the files this backup made are removed on an error, and the
	// folder is locked while they are written: another backup into the
	// same folder (or a check, or a restore, reading it) is refused,
	// ErrBusy, and takes nothing for its own.
	var written []string
	unlock := func() {}
	defer func() {
		if err != nil {
			for i := len(written) - 1; i >= 0; i-- {
				os.Remove(written[i])
			}
			if created {
				os.Remove(out)
			}
		}
		unlock()
	}()
	if unlock, err = lockBackup(out, true); err != nil {
		created = false // another backup may be writing into it
		unlock = func() {}
		return nil, err
	}
	// Found empty again under the lock: a backup may have ended there
	// between the first look and the lock.
	if err = checkOut(out); err != nil {
		created = false
		return nil, err
	}
	opts.step("out")

	for _, s := range sources {
		abs, aerr := filepath.Abs(s.path)
		if aerr != nil {
			return nil, fmt.Errorf("backup: %w", aerr)
		}
		if s.optional {
			if _, serr := os.Stat(abs); errors.Is(serr, fs.ErrNotExist) {
				continue
			}
		}
		dst := filepath.Join(out, s.name)
		// The folders a name in a folder of the data folder needs, and
		// any file SQLite keeps beside a database while it writes or
		// opens it (the copy is opened to be verified): on an error,
		// they go too (removed in the reverse order, files first).
		for _, d := range missingDirs(out, filepath.Dir(dst)) {
			if err = os.Mkdir(d, 0o700); err != nil {
				return nil, fmt.Errorf("backup: %w", err)
			}
			written = append(written, d)
		}
		// Made here, empty and private, before it is listed for removal:
		// a file of that name this backup did not make is not removed.
		if err = createEmpty(dst); err != nil {
			return nil, err
		}
		written = append(written, dst)
		if s.kind == KindDatabase {
			written = append(written, dst+"-journal", dst+"-wal", dst+"-shm")
			err = copyDatabase(ctx, abs, dst)
		} else {
			err = copyFile(abs, dst)
		}
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, File{Name: filepath.ToSlash(s.name), Kind: s.kind, Source: abs})
	}
	record := ""
	for _, f := range m.Files {
		if f.Kind == KindSealRecord {
			record = filepath.Join(out, recordName)
		}
	}
	// Its seals and checkpoints signed by the node's key, as the node
	// and Check require: a log another key sealed, or pruned behind a
	// checkpoint no key signed, is no backup a node with this key
	// restores.
	if m.Audit, m.AuditEntries, err = verifyTasks(ctx, filepath.Join(out, tasksName), record, m.Address); err != nil {
		return nil, err
	}
	// Sums last: opening the copy to verify it may have rewritten it.
	for i := range m.Files {
		f := &m.Files[i]
		if f.Size, f.SHA256, err = sum(filepath.Join(out, filepath.FromSlash(f.Name))); err != nil {
			return nil, err
		}
	}
	m.CreatedAt = opts.Now().UTC()
	written = append(written, filepath.Join(out, manifestTemp), filepath.Join(out, ManifestName))
	if err = writeManifest(out, m); err != nil {
		return nil, err
	}
	return m, nil
}

func network(cfg config.Config) identity.Network {
	if cfg.Testnet {
		return identity.Testnet
	}
	return identity.Mainnet
}

// nameSources gives each source in the data folder its path there, so
// that the backup has the data folder's layout; the others keep the
// fixed name they were given. Two sources with one name are an error.
func nameSources(dataDir string, sources []source) error {
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	seen := make(map[string]string, len(sources))
	for i := range sources {
		s := &sources[i]
		abs, err := filepath.Abs(s.path)
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if rel, err := filepath.Rel(data, abs); err == nil && filepath.IsLocal(rel) {
			s.name = rel
		}
		if s.name == ManifestName {
			return fmt.Errorf("backup: %s (%s) would replace the manifest: rename it", abs, s.kind)
		}
		if prev, dup := seen[s.name]; dup {
			return fmt.Errorf("backup: %s and %s would both be %s in the backup", prev, abs, s.name)
		}
		seen[s.name] = abs
	}
	return nil
}

// checkOut refuses an output folder that holds files, or is not a folder.
func checkOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("backup: output folder: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("%w: %s holds %s", ErrNotEmpty, out, entries[0].Name())
	}
	return nil
}

// prepareOut makes the output folder (0700) unless it exists; checkOut
// has refused one that is not empty. created reports whether it made it.
// An existing folder open to group or others is made 0700 before it is
// found empty: others could otherwise put files of their own in place
// of the copies (a folder of another user's cannot be, and is refused).
func prepareOut(out string) (created bool, err error) {
	if err := checkOut(out); err != nil {
		return false, err
	}
	err = os.Mkdir(out, 0o700)
	switch {
	case errors.Is(err, fs.ErrExist):
		if runtime.GOOS == "windows" { // no Unix permissions to narrow
			return false, nil
		}
		fi, err := os.Stat(out)
		if err != nil {
			return false, fmt.Errorf("backup: output folder: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(out, 0o700); err != nil {
				return false, fmt.Errorf("backup: output folder %s is open to other users (%04o) and cannot be made 0700: %w", out, fi.Mode().Perm(), err)
			}
		}
		return false, checkOut(out)
	case err != nil:
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return false, fmt.Errorf("backup: output folder: %w", err)
		}
		if err := os.Mkdir(out, 0o700); err != nil {
			return false, fmt.Errorf("backup: output folder: %w", err)
		}
	}
	return true, nil
}

// createEmpty makes the new, empty file path (0600): it must not exist.
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return f.Close()
}

// copyDatabase copies the SQLite database src to dst, an empty file
// (createEmpty: private, 0600, which VACUUM INTO fills), with VACUUM INTO
// on a connection of its own: one read transaction, so the copy is the
// database as one commit left it, and the node's writer goes on.
func copyDatabase(ctx context.Context, src, dst string) error {
	// The path as it is, as the node opens it: a "file:" URI would read
	// a '%' in it as an escape and name another file.
	db, err := sql.Open("sqlite", src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("backup: copy %s: %w", src, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("backup: %s: %w", src, err)
	}
	return checkDatabase(ctx, dst)
}

// checkDatabase runs SQLite's integrity check on the copy at path and
// syncs it to disk.
func checkDatabase(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return fmt.Errorf("backup: open the copy %s: %w", path, err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check(1)").Scan(&res); err != nil {
		return fmt.Errorf("backup: check the copy %s: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("backup: the copy %s is damaged: %s", path, res)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("backup: %s: %w", path, err)
	}
	return syncFile(path)
}

// verifyTasks opens the copied task database and verifies its audit
// chain, against the copied record of the last seal when there is one
// (record, "" when none), its seals and checkpoints signed by owner, the
// address of the node's key, and that the address it records as its
// node's (if any) is owner; it returns the chain's head and length.
func verifyTasks(ctx context.Context, path, record, owner string) (audit.Anchor, int64, error) {
	o := audit.VerifyOptions{Signer: owner}
	if record != "" {
		rec, err := audit.ReadSealRecord(record)
		if err != nil {
			return audit.Anchor{}, 0, fmt.Errorf("backup: %w", err)
		}
		o.SealRecord = &rec
	}
	db, err := sqldb.Open(ctx, path, sqldb.Options{Existing: true})
	if err != nil {
		return audit.Anchor{}, 0, fmt.Errorf("backup: open the copy: %w", err)
	}
	defer db.Close()
	// The node's address, recorded in the database at its first start
	// on it (a database made before the record has none): a node with
	// another key refuses to start on it.
	if recorded, err := sqlstore.ReadIdentity(ctx, db); err != nil {
		return audit.Anchor{}, 0, fmt.Errorf("backup: the copy's record of its node: %w", err)
	} else if recorded != "" && recorded != owner {
		return audit.Anchor{}, 0, fmt.Errorf("backup: the database belongs to %s (recorded at that node's first start on it), not to %s, the address of the key: a node with that key does not start on it", recorded, owner)
	}
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		return audit.Anchor{}, 0, fmt.Errorf("backup: the copy's audit log: %w", err)
	}
	defer log.Close()
	rep, err := log.VerifyWith(ctx, o)
	if err != nil {
		return audit.Anchor{}, 0, fmt.Errorf("backup: the copy's audit log does not verify: %w", err)
	}
	if err := errors.Join(log.Close(), db.Close()); err != nil {
		return audit.Anchor{}, 0, fmt.Errorf("backup: %w", err)
	}
	// Closed, SQLite has checkpointed the write-ahead log into the file
	// and removed it: the backup is the one file.
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		return audit.Anchor{}, 0, fmt.Errorf("backup: the copy %s kept a write-ahead log after it was closed", path)
	}
	return rep.Head, rep.Entries, syncFile(path)
}

// copyFile copies the regular file src to dst, an empty file made by
// createEmpty (0600: a key, a policy, a configuration; none is for
// others to read), and syncs it.
func copyFile(src, dst string) error {
	// Opened without waiting: a FIFO's plain open waits for a writer.
	in, _, err := readfile.Open(src)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("backup: copy %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("backup: %w", err)
	}
	return out.Close()
}

// writeNew copies in, the file named name, to dst, a new file (0600),
// not synced: a temporary copy.
func writeNew(dst string, in io.Reader, name string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("backup: copy %s: %w", name, err)
	}
	return out.Close()
}

// exists tells whether there is a file (of any kind) at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// sum returns the size and SHA-256 (hex) of the file at path.
func sum(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("backup: %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// manifestTemp is the name the manifest is written under before it is
// renamed to ManifestName.
const manifestTemp = "." + ManifestName + ".tmp"

// missingDirs returns the folders from out (excluded) down to dir that do
// not exist yet, outermost first.
func missingDirs(out, dir string) []string {
	var dirs []string
	for d := dir; d != out && len(d) > len(out); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	return dirs
}

// writeManifest writes m as out/manifest.json, last and atomically: a
// folder with a manifest holds every file it lists, synced.
func writeManifest(out string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("backup: manifest: %w", err)
	}
	tmp := filepath.Join(out, manifestTemp)
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		os.Remove(tmp) // a disk that filled up leaves it half written
		return fmt.Errorf("backup: manifest: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(out, ManifestName)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup: manifest: %w", err)
	}
	return syncDir(out)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: sync %s: %w", path, err)
	}
	return f.Close()
}

// syncDir syncs the folder dir and those below it that hold files of the
// backup, so that their entries survive a power cut.
func syncDir(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if err := syncdir.Sync(path); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		return nil
	})
}
