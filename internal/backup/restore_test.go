package backup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/flock"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// restoreOpts dates the files kept aside.
func restoreOpts() backup.RestoreOptions { return backup.RestoreOptions{Now: opts().Now} }

// changeAfterBackup changes the node's state after its backup as a node
// would: more audit entries and a new seal (audit-seal.json rewritten),
// another policy, and leaves tasks.db with a write-ahead log beside it,
// as a node killed with uncheckpointed commits does. It returns the
// sums of the files at the manifest's sources.
func changeAfterBackup(t *testing.T, cfg config.Config) map[string]string {
	t.Helper()
	ctx := context.Background()
	db, log := signedLog(t, cfg)
	for range 3 {
		if _, err := log.Append(ctx, audit.Entry{Actor: address, Task: "t2", Action: "b", Step: audit.StepReceived}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := log.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
	wal, err := os.ReadFile(tasksDB + "-wal")
	if err != nil || len(wal) == 0 {
		t.Fatalf("no write-ahead log while the database is open: %v", err)
	}
	log.Close()
	db.Close()
	// The log as a kill left it: its frames would overwrite the pages of
	// a database put in its place.
	if err := os.WriteFile(tasksDB+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Policy, []byte("forbid(principal, action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sums(t, cfg)
}

// sums are the SHA-256 of the node's files, by path ("" for none).
func sums(t *testing.T, cfg config.Config) map[string]string {
	t.Helper()
	tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
	s := map[string]string{}
	for _, p := range []string{tasksDB, tasksDB + "-wal", cfg.KeyPath(), cfg.SealRecordPath(), cfg.Policy} {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(abs); err == nil {
			s[abs] = hexSum(b)
		} else {
			s[abs] = ""
		}
	}
	return s
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// headOf verifies the audit log of the database at path and returns its
// head.
func headOf(t *testing.T, path string) audit.Anchor {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, path, sqldb.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rep, err := log.VerifyWith(ctx, audit.VerifyOptions{Signer: address})
	if err != nil {
		t.Fatalf("the audit log of %s: %v", path, err)
	}
	return rep.Head
}

// checkRestored checks that every file of m is at its source with the
// backup's sum, 0600, that no write-ahead log of the old database is
// beside it, and that the journal is gone.
func checkRestored(t *testing.T, cfg config.Config, m *backup.Manifest) {
	t.Helper()
	for _, f := range m.Files {
		b, err := os.ReadFile(f.Source)
		if err != nil {
			t.Fatal(err)
		}
		if hexSum(b) != f.SHA256 {
			t.Errorf("%s is not the backup's %s", f.Source, f.Name)
		}
		if fi, err := os.Stat(f.Source); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", f.Source, fi.Mode(), err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(f.Source), "."+filepath.Base(f.Source)+".restoring")); err == nil {
			t.Errorf("the temporary file of %s is left", f.Source)
		}
	}
	tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
	if _, err := os.Stat(tasksDB + "-wal"); err == nil {
		t.Errorf("the old write-ahead log is left beside the restored %s", tasksDB)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, backup.JournalName)); err == nil {
		t.Errorf("the journal is left after the restore")
	}
	if h := headOf(t, tasksDB); h != m.Audit {
		t.Errorf("the restored log's head %+v, the manifest's %+v", h, m.Audit)
	}
	if _, err := backup.Check(context.Background(), cfg, filepath.Dir(tasksDB)); err == nil {
		t.Errorf("the data folder passes for a backup")
	}
}

// A restore puts every file of the backup at its source, keeps the files
// it replaced (a database with its write-ahead log) under the restore's
// time, leaves the old write-ahead log out of the restored database, and
// the workspace alone.
func TestRestore(t *testing.T) {
	cfg, out := sealedBackup(t)
	sandbox := filepath.Join(cfg.SandboxPath(), "mine.txt")
	if err := os.MkdirAll(filepath.Dir(sandbox), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sandbox, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := changeAfterBackup(t, cfg)
	r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	checkRestored(t, cfg, r.Manifest)
	stamp := ".before-restore-" + at.Format("20060102T150405Z")
	tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
	for _, f := range r.Files {
		switch f.Source {
		case tasksDB:
			if f.State != backup.StateReplaced || !slices.Equal(f.Aside, []string{tasksDB + stamp, tasksDB + stamp + "-wal"}) {
				t.Errorf("tasks.db: %+v", f)
			}
		case cfg.Policy:
			if f.State != backup.StateReplaced || !slices.Equal(f.Aside, []string{cfg.Policy + stamp}) {
				t.Errorf("the policy: %+v", f)
			}
		case cfg.KeyPath():
			if f.State != backup.StateUnchanged || len(f.Aside) != 0 {
				t.Errorf("the key, unchanged since the backup: %+v", f)
			}
		}
	}
	for path, sum := range before {
		if path == cfg.KeyPath() || sum == "" {
			continue
		}
		aside := path + stamp
		if strings.HasSuffix(path, "-wal") {
			aside = strings.TrimSuffix(path, "-wal") + stamp + "-wal"
		}
		if b, err := os.ReadFile(aside); err != nil || hexSum(b) != sum {
			t.Errorf("%s is not kept as %s: %v", path, aside, err)
		}
	}
	// The old database kept aside is whole, its log with it.
	if h := headOf(t, tasksDB+stamp); h.Seq <= r.Manifest.Audit.Seq {
		t.Errorf("the database kept aside ends at %d, the backup's at %d", h.Seq, r.Manifest.Audit.Seq)
	}
	if b, err := os.ReadFile(sandbox); err != nil || string(b) != "mine\n" {
		t.Errorf("the workspace: %q %v", b, err)
	}
	if r.Workspace != cfg.SandboxPath() {
		t.Errorf("workspace %q, want %q", r.Workspace, cfg.SandboxPath())
	}

	// Again: every file is already the backup's.
	r, err = backup.Restore(context.Background(), cfg, out, backup.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Files {
		if f.State != backup.StateUnchanged {
			t.Errorf("restored twice: %+v", f)
		}
	}
}

// With Discard, the files replaced are deleted, a database's log too.
func TestRestoreDiscard(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	r, err := backup.Restore(context.Background(), cfg, out, backup.RestoreOptions{Discard: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRestored(t, cfg, r.Manifest)
	matches, _ := filepath.Glob(filepath.Join(cfg.DataDir, "*.before-restore-*"))
	if p, _ := filepath.Glob(cfg.Policy + ".before-restore-*"); len(matches)+len(p) > 0 {
		t.Errorf("files kept with Discard: %v %v", matches, p)
	}
}

// A restore stopped after any of its steps leaves each file the old one
// or the backup's, whole, and its journal: another backup is then
// refused, the same one finishes the restore.
func TestRestoreKilled(t *testing.T) {
	cfg, out := sealedBackup(t)
	m, err := backup.Check(context.Background(), cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	// The steps by kind: each test has folders of its own. The key is
	// the backup's already: no step replaces it.
	steps := []string{"journal"}
	for _, f := range m.Files {
		if f.Kind != backup.KindKey {
			steps = append(steps, f.Kind+" "+f.Name)
		}
	}
	errKill := errors.New("killed")
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			cfg, out := sealedBackup(t)
			m, err := backup.Check(context.Background(), cfg, out)
			if err != nil {
				t.Fatal(err)
			}
			before := changeAfterBackup(t, cfg)
			source := map[string]string{"journal": "journal"}
			backupSums := map[string]string{}
			for _, f := range m.Files {
				source[f.Kind+" "+f.Name] = f.Source
				backupSums[f.Source] = f.SHA256
			}
			o := backup.WithAfterStep(restoreOpts(), func(s string) error {
				if s == source[step] {
					return errKill
				}
				return nil
			})
			if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, errKill) {
				t.Fatalf("Restore killed after %s: %v", step, err)
			}
			journal := filepath.Join(cfg.DataDir, backup.JournalName)
			if _, err := os.Stat(journal); err != nil {
				t.Fatalf("no journal after the kill: %v", err)
			}
			for path, old := range sums(t, cfg) {
				if strings.HasSuffix(path, "-wal") {
					continue
				}
				if old != before[path] && old != backupSums[path] {
					t.Errorf("%s is neither the old file nor the backup's", path)
				}
			}
			other := filepath.Join(t.TempDir(), "other")
			if err := os.CopyFS(other, os.DirFS(out)); err != nil {
				t.Fatal(err)
			}
			if _, err := backup.Restore(context.Background(), cfg, other, restoreOpts()); !errors.Is(err, backup.ErrUnfinished) || !strings.Contains(err.Error(), out) {
				t.Errorf("Restore of another backup after the kill: %v; want ErrUnfinished naming %s", err, out)
			}
			r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
			if err != nil {
				t.Fatalf("Restore again: %v", err)
			}
			if !r.Finished {
				t.Errorf("the second restore does not say it finished the first")
			}
			checkRestored(t, cfg, r.Manifest)
		})
	}
}

// A restore is refused, and changes nothing, while a node holds the data
// folder; of a damaged backup; of a PostgreSQL node.
func TestRestoreRefuses(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	before := listing(t, cfg.DataDir)
	if flock.Supported {
		f, err := os.Open(cfg.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := flock.TryExclusive(f); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Restore(context.Background(), cfg, out, restoreOpts()); !errors.Is(err, backup.ErrRunning) {
			t.Errorf("Restore while the data folder is locked: %v; want ErrRunning", err)
		}
		f.Close()
	}
	flip(t, filepath.Join(out, "tasks.db"), 200)
	if _, err := backup.Restore(context.Background(), cfg, out, restoreOpts()); !errors.Is(err, backup.ErrBad) {
		t.Errorf("Restore of a damaged backup: %v; want ErrBad", err)
	}
	if after := listing(t, cfg.DataDir); !slices.Equal(before, after) {
		t.Errorf("a refused restore changed the data folder:\n%v\n%v", before, after)
	}
	pg := cfg
	pg.Database = "postgres://snapnode@127.0.0.1:1/snapnode"
	if _, err := backup.Restore(context.Background(), pg, out, restoreOpts()); !errors.Is(err, backup.ErrPostgres) {
		t.Errorf("Restore for a PostgreSQL node: %v; want ErrPostgres", err)
	}
}

// A backup made before the node first sealed its log holds no record of
// the last seal; the record the node wrote since names seals the
// backup's log lacks, and a node would not start on the two: the restore
// sets it aside, with an agent.id made since.
func TestRestoreSetsAsideFilesTheBackupLacks(t *testing.T) {
	cfg := dataDir(t, 3)
	out := filepath.Join(t.TempDir(), "backup")
	ctx := context.Background()
	m, err := backup.Run(ctx, cfg, out, opts())
	if err != nil {
		t.Fatal(err)
	}
	changeAfterBackup(t, withPolicy(t, cfg))
	agentID := filepath.Join(cfg.DataDir, "agent.id")
	if err := os.WriteFile(agentID, []byte("node-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := backup.Restore(ctx, cfg, out, restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	checkRestored(t, cfg, m)
	stamp := ".before-restore-" + at.Format("20060102T150405Z")
	for _, p := range []string{cfg.SealRecordPath(), agentID} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s, not in the backup, is left", p)
		}
		if _, err := os.Stat(p + stamp); err != nil {
			t.Errorf("%s is not kept aside: %v", p, err)
		}
		if !slices.ContainsFunc(r.Files, func(f backup.RestoredFile) bool {
			return f.Source == p && f.State == backup.StateRemoved && slices.Equal(f.Aside, []string{p + stamp})
		}) {
			t.Errorf("%s is not reported removed: %+v", p, r.Files)
		}
	}
}

// withPolicy gives cfg a policy file.
func withPolicy(t *testing.T, cfg config.Config) config.Config {
	t.Helper()
	cfg.Policy = filepath.Join(t.TempDir(), "mine.cedar")
	if err := os.WriteFile(cfg.Policy, []byte("permit(principal, action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A restore killed while it wrote its journal leaves the journal's
// temporary file: the next restore writes it again rather than stopping
// on it for ever.
func TestRestoreAfterKillWhileWritingTheJournal(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	stale := filepath.Join(cfg.DataDir, "."+backup.JournalName+".restoring")
	if err := os.WriteFile(stale, []byte(`{"backup":`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
	if err != nil {
		t.Fatalf("Restore after a kill while the journal was written: %v", err)
	}
	checkRestored(t, cfg, r.Manifest)
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the journal's temporary file is left")
	}
}

// The bytes a restore writes are the bytes its checks verified: a backup
// folder whose tasks.db is swapped for a sound one after its sum was
// checked, and back after the audit chain was, is refused, the node's
// files left as they are.
func TestRestoreSwappedWhileChecked(t *testing.T) {
	cfg, out := sealedBackup(t)
	path := filepath.Join(out, "tasks.db")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flip(t, path, 200)
	editManifest(t, out, nil) // the manifest gives the damaged file's sum
	bad, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Error(err)
		}
	}
	before := sums(t, cfg)
	o := backup.WithCheckStep(restoreOpts(), func(step string) {
		switch step {
		case "sum tasks.db":
			put(good)
		case "chain":
			put(bad)
		}
	})
	if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, backup.ErrBad) {
		t.Errorf("Restore of a tasks.db swapped while it was checked: %v; want ErrBad", err)
	}
	if after := sums(t, cfg); !maps.Equal(before, after) {
		t.Errorf("the refused restore changed the node's files")
	}
}

// writeJournalFile writes a journal of a restore of out into cfg's data
// folder, as a restore stopped midway (or someone) left it.
func writeJournalFile(t *testing.T, cfg config.Config, j string) string {
	t.Helper()
	path := filepath.Join(cfg.DataDir, backup.JournalName)
	if err := os.WriteFile(path, []byte(j), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A journal is the restore's own: one whose time, which names the files
// kept aside, is not a time (a path that leaves their folder), or that
// is not a regular file, is refused, nothing changed.
func TestRestoreRefusesAHostileJournal(t *testing.T) {
	for name, setup := range map[string]func(t *testing.T, cfg config.Config, out string){
		"stamp leaves the folder": func(t *testing.T, cfg config.Config, out string) {
			writeJournalFile(t, cfg, `{"backup":"`+out+`","startedAt":"2026-11-25T10:15:00Z","stamp":"x/../../escaped","files":[]}`)
			// The folders the names would go through.
			for _, p := range []string{filepath.Join(cfg.DataDir, "tasks.db"), filepath.Join(cfg.DataDir, "audit-seal.json"), cfg.Policy} {
				if err := os.Mkdir(p+".before-restore-x", 0o700); err != nil {
					t.Fatal(err)
				}
			}
		},
		"relative backup": func(t *testing.T, cfg config.Config, out string) {
			writeJournalFile(t, cfg, `{"backup":"backup","startedAt":"2026-11-25T10:15:00Z","stamp":"20261125T101500Z","files":[]}`)
		},
		"symbolic link": func(t *testing.T, cfg config.Config, out string) {
			elsewhere := filepath.Join(t.TempDir(), "journal.json")
			if err := os.WriteFile(elsewhere, []byte(`{"backup":"`+out+`","startedAt":"2026-11-25T10:15:00Z","stamp":"20261125T101500Z","files":[]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(cfg.DataDir, backup.JournalName)); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, out := sealedBackup(t)
			changeAfterBackup(t, cfg)
			setup(t, cfg, out)
			before := sums(t, cfg)
			if _, err := backup.Restore(context.Background(), cfg, out, restoreOpts()); !errors.Is(err, backup.ErrUnfinished) {
				t.Errorf("Restore with the journal: %v; want ErrUnfinished", err)
			}
			if after := sums(t, cfg); !maps.Equal(before, after) {
				t.Errorf("the refused restore changed the node's files")
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(cfg.DataDir), "escaped")); err == nil {
				t.Errorf("a file was kept aside outside its folder")
			}
		})
	}
}

// A restore that finishes an interrupted one lists each file once in
// its journal.
func TestRestoreJournalListsEachFileOnce(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	errKill := errors.New("killed")
	o := backup.WithAfterStep(restoreOpts(), func(s string) error {
		if s == "journal" {
			return errKill
		}
		return nil
	})
	for range 2 {
		if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, errKill) {
			t.Fatalf("Restore killed after the journal: %v", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, backup.JournalName))
	if err != nil {
		t.Fatal(err)
	}
	var j struct{ Files []string }
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range j.Files {
		if seen[f] {
			t.Errorf("the journal lists %s twice: %v", f, j.Files)
		}
		seen[f] = true
	}
}

// A file already under the name a replaced file would be kept under (a
// restore in the same second) stops the restore before anything
// changed, not midway.
func TestRestoreRefusesATakenAsideName(t *testing.T) {
	for _, suffix := range []string{"", "-wal"} {
		t.Run("tasks.db"+suffix, func(t *testing.T) {
			cfg, out := sealedBackup(t)
			changeAfterBackup(t, cfg)
			tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
			taken := tasksDB + ".before-restore-" + at.Format("20060102T150405Z") + suffix
			if err := os.WriteFile(taken, []byte("mine\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := sums(t, cfg)
			_, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
			if err == nil || !strings.Contains(err.Error(), taken) {
				t.Errorf("Restore with %s taken: %v; want an error naming it", taken, err)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, backup.JournalName)); err == nil {
				t.Errorf("the refused restore left its journal: the node would not start")
			}
			if after := sums(t, cfg); !maps.Equal(before, after) {
				t.Errorf("the refused restore changed the node's files")
			}
		})
	}
}

// A data folder a restore stopped midway in holds some files of the
// backup and others not: no backup is made of it.
func TestRunRefusesAHalfRestoredFolder(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	errKill := errors.New("killed")
	o := backup.WithAfterStep(restoreOpts(), func(s string) error {
		if s != "journal" && s != cfg.KeyPath() {
			return errKill
		}
		return nil
	})
	if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, errKill) {
		t.Fatalf("Restore killed midway: %v", err)
	}
	again := filepath.Join(t.TempDir(), "again")
	if _, err := backup.Run(context.Background(), cfg, again, opts()); !errors.Is(err, backup.ErrUnfinished) {
		t.Errorf("backup of a half-restored folder: %v; want ErrUnfinished", err)
	}
	if _, err := os.Stat(again); err == nil {
		t.Errorf("the refused backup made its folder")
	}
}

// A restore that finishes an interrupted one names the files the first
// run kept aside, which no one saw it print.
func TestRestoreFinishedNamesTheFilesKeptBefore(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
	errKill := errors.New("killed")
	o := backup.WithAfterStep(restoreOpts(), func(s string) error {
		if s == tasksDB {
			return errKill
		}
		return nil
	})
	if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, errKill) {
		t.Fatalf("Restore killed after tasks.db: %v", err)
	}
	r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	stamp := ".before-restore-" + at.Format("20060102T150405Z")
	for _, f := range r.Files {
		if f.Source == tasksDB && !slices.Equal(f.Aside, []string{tasksDB + stamp, tasksDB + stamp + "-wal"}) {
			t.Errorf("tasks.db, replaced by the first run: %+v", f)
		}
	}
}

// A restore stopped within the replacement of tasks.db, after the old
// file was kept or after its write-ahead log was put aside and before
// the restored file took its place, leaves the old database whole under
// its kept name (its log beside it), and the same restore finishes:
// the old log is never applied to the restored database.
func TestRestoreKilledWithinADatabase(t *testing.T) {
	for _, step := range []string{" kept", "-wal aside", "-shm aside"} {
		t.Run(strings.TrimSpace(step), func(t *testing.T) {
			cfg, out := sealedBackup(t)
			changeAfterBackup(t, cfg)
			tasksDB, _ := sqldb.SQLitePath(cfg.DatabaseDSN())
			if step == "-shm aside" {
				if err := os.WriteFile(tasksDB+"-shm", make([]byte, 32768), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// The old database's head, read on a copy with its log.
			old := filepath.Join(t.TempDir(), "old.db")
			for _, s := range []string{"", "-wal"} {
				b, err := os.ReadFile(tasksDB + s)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(old+s, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := headOf(t, old)
			errKill := errors.New("killed")
			o := backup.WithAfterStep(restoreOpts(), func(s string) error {
				if s == tasksDB+step {
					return errKill
				}
				return nil
			})
			if _, err := backup.Restore(context.Background(), cfg, out, o); !errors.Is(err, errKill) {
				t.Fatalf("Restore killed at %q: %v", step, err)
			}
			r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
			if err != nil {
				t.Fatalf("Restore again: %v", err)
			}
			checkRestored(t, cfg, r.Manifest)
			stamp := ".before-restore-" + at.Format("20060102T150405Z")
			if h := headOf(t, tasksDB+stamp); h != want || h.Seq <= r.Manifest.Audit.Seq {
				t.Errorf("the database kept aside ends at %+v, the old one at %+v; the backup's at %d", h, want, r.Manifest.Audit.Seq)
			}
		})
	}
}
