package backup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// The key of the SNAP reference vectors and its address.
const (
	secret  = "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a"
	address = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
)

var at = time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)

func opts() backup.Options { return backup.Options{Now: func() time.Time { return at }} }

// dataDir makes a node's data folder: its key and a task database whose
// audit log holds entries audited entries; it returns the settings.
func dataDir(t *testing.T, entries int) config.Config {
	t.Helper()
	t.Setenv(identity.EnvKey, "")
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	if err := cfg.EnsureDataDir(); err != nil {
		t.Fatal(err)
	}
	k, err := identity.FromHex(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(cfg.KeyPath(), k); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for i := range entries {
		if _, err := log.Append(ctx, audit.Entry{Actor: address, Task: "t", Action: "a", Step: audit.StepReceived, Reason: strings.Repeat("x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// signedLog opens the task database of the node cfg and its audit log as
// the node does: signed by the node's key, its seals recorded at the
// node's seal record. The caller closes both, the log first.
func signedLog(t *testing.T, cfg config.Config) (*sqldb.DB, *audit.Log) {
	t.Helper()
	ctx := context.Background()
	k, err := identity.FromHex(secret)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.New(ctx, db, audit.Options{Signer: audit.IdentitySigner(k, identity.Mainnet), SealRecord: cfg.SealRecordPath()})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, log
}

func TestRunCopiesAndDescribes(t *testing.T) {
	cfg := dataDir(t, 5)
	cfg.Policy = filepath.Join(t.TempDir(), "mine.cedar")
	if err := os.WriteFile(cfg.Policy, []byte("permit (principal, action, resource);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Run(context.Background(), cfg, out, opts())
	if err != nil {
		t.Fatal(err)
	}
	if m.Address != address || m.Audit.Seq != 5 || m.AuditEntries != 5 || len(m.Audit.Hash) != 64 || !m.CreatedAt.Equal(at) {
		t.Errorf("manifest: %+v", m)
	}
	kinds := map[string]string{}
	for _, f := range m.Files {
		kinds[f.Name] = f.Kind
		b, err := os.ReadFile(filepath.Join(out, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if int64(len(b)) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: size %d sha256 %s in the manifest; the file has %d bytes, %x", f.Name, f.Size, f.SHA256, len(b), sum)
		}
		if !filepath.IsAbs(f.Source) {
			t.Errorf("%s: source %q is not absolute", f.Name, f.Source)
		}
		fi, _ := os.Stat(filepath.Join(out, f.Name))
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f.Name, perm)
		}
	}
	want := map[string]string{"identity.key": backup.KindKey, "tasks.db": backup.KindDatabase, "policy.cedar": backup.KindPolicy}
	if len(kinds) != len(want) {
		t.Errorf("files %v, want %v", kinds, want)
	}
	for name, kind := range want {
		if kinds[name] != kind {
			t.Errorf("%s: kind %q, want %q", name, kinds[name], kind)
		}
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "-wal") || strings.HasSuffix(e.Name(), "-shm") || strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left in the backup: %s", e.Name())
		}
	}
	// The manifest on disk is the one returned; the copy opens and its
	// audit log verifies to the head the manifest gives.
	var onDisk backup.Manifest
	b, err := os.ReadFile(filepath.Join(out, backup.ManifestName))
	if err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.Audit != m.Audit || len(onDisk.Files) != len(m.Files) {
		t.Fatalf("manifest.json: %v %s", err, b)
	}
	db, err := sqldb.Open(context.Background(), filepath.Join(out, "tasks.db"), sqldb.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log, err := audit.New(context.Background(), db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if rep, err := log.Verify(context.Background()); err != nil || rep.Head != m.Audit {
		t.Errorf("the copy verifies to %+v (%v), the manifest says %+v", rep.Head, err, m.Audit)
	}
}

func TestRunRefuses(t *testing.T) {
	cfg := dataDir(t, 1)
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "old.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*config.Config)
		out    string
		want   error
	}{
		{"non-empty folder", nil, full, backup.ErrNotEmpty},
		{"postgres", func(c *config.Config) { c.Database = "postgres://snapnode@127.0.0.1:1/x" }, "", backup.ErrPostgres},
		{"memory", func(c *config.Config) { c.Database = config.MemoryDatabase }, "", backup.ErrMemory},
		{"wrong data folder", func(c *config.Config) { c.DataDir = filepath.Join(t.TempDir(), "nothing") }, "", backup.ErrNoDatabase},
		{"missing key", func(c *config.Config) { c.KeyFile = filepath.Join(t.TempDir(), "none.key") }, "", os.ErrNotExist},
		{"output is a file", nil, file, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.mutate != nil {
				tt.mutate(&c)
			}
			out := tt.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "backup")
			}
			_, err := backup.Run(context.Background(), c, out, opts())
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if tt.out == "" {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("the output folder exists after a refusal: %v", err)
				}
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "old.txt")); err != nil || string(b) != "keep me" {
		t.Errorf("the non-empty folder's file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "nothing")); !os.IsNotExist(err) {
		t.Errorf("a wrong data folder was created: %v", err)
	}
}

// A step that fails after files were copied (here the policy file, named
// but missing) leaves the output folder as it found it: a partial backup
// is never mistaken for one.
func TestRunCleansUpAfterAFailure(t *testing.T) {
	cfg := dataDir(t, 1)
	cfg.Policy = filepath.Join(t.TempDir(), "gone.cedar")
	out := t.TempDir() // exists, empty: kept, emptied
	if _, err := backup.Run(context.Background(), cfg, out, opts()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want the missing policy file", err)
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 0 {
		t.Errorf("left after the failure: %v %v", entries, err)
	}
}

// A database in a folder of the data folder keeps its path in the
// backup, in a folder made for it; a failure after it was copied removes
// that folder too, and the output folder Run made.
func TestRunCleansUpItsFolders(t *testing.T) {
	cfg := dataDir(t, 1)
	nested := filepath.Join(cfg.DataDir, "db", "tasks.db")
	if err := os.Mkdir(filepath.Dir(nested), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfg.DatabaseDSN(), nested); err != nil {
		t.Fatal(err)
	}
	cfg.Database = nested
	cfg.Policy = filepath.Join(t.TempDir(), "gone.cedar")
	out := filepath.Join(t.TempDir(), "backup")
	if _, err := backup.Run(context.Background(), cfg, out, opts()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err %v, want the missing policy file", err)
	}
	if entries, err := os.ReadDir(out); !os.IsNotExist(err) {
		t.Errorf("the output folder is left after the failure: %v %v", entries, err)
	}
}

// With the key in SNAPNODE_KEY there is no key file to copy; the manifest
// says so and still names the address.
func TestRunKeyInEnvironment(t *testing.T) {
	cfg := dataDir(t, 0)
	if err := os.Remove(cfg.KeyPath()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(identity.EnvKey, secret)
	cfg.Testnet = true
	m, err := backup.Run(context.Background(), cfg, filepath.Join(t.TempDir(), "b"), opts())
	if err != nil {
		t.Fatal(err)
	}
	if !m.KeyInEnvironment || !strings.HasPrefix(m.Address, "tb1p") || m.Audit.Seq != 0 || m.Audit.Hash != audit.Genesis {
		t.Errorf("manifest: %+v", m)
	}
	for _, f := range m.Files {
		if f.Kind == backup.KindKey {
			t.Errorf("a key file in the backup: %+v", f)
		}
	}
}

// A copy whose audit chain does not verify is not a backup.
func TestRunRefusesATamperedAuditLog(t *testing.T) {
	cfg := dataDir(t, 3)
	db, err := sqldb.Open(context.Background(), cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.Exec("UPDATE audit_log SET reason = 'edited' WHERE seq = 2"); err != nil {
		db.Close()
		t.Fatal(err)
	}
	db.Close()
	out := filepath.Join(t.TempDir(), "b")
	_, err = backup.Run(context.Background(), cfg, out, opts())
	if !errors.Is(err, audit.ErrTampered) {
		t.Fatalf("err %v, want audit.ErrTampered", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output folder exists: %v", err)
	}
}

// The node opens its files by their paths as they are; so does the
// backup: a '%' in the data folder's path is a character, not an escape
// of a URI that names another folder (here "data", where the copy would
// have made an empty database and backed that up).
func TestRunPercentInPath(t *testing.T) {
	cfg := dataDir(t, 3)
	parent := filepath.Dir(cfg.DataDir)
	pct := filepath.Join(parent, "da%74a") // %74 is 't'
	if err := os.Rename(cfg.DataDir, pct); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := cfg.DataDir
	cfg.DataDir = pct
	m, err := backup.Run(context.Background(), cfg, filepath.Join(t.TempDir(), "backup"), opts())
	if err != nil {
		t.Fatal(err)
	}
	if m.AuditEntries != 3 || m.Audit.Seq != 3 {
		t.Errorf("backup of %s holds %d audit entries (head %d), want 3", pct, m.AuditEntries, m.Audit.Seq)
	}
	if entries, _ := os.ReadDir(other); len(entries) > 0 {
		t.Errorf("the backup wrote %s in %s", entries[0].Name(), other)
	}
}

// The node's record of its last seal (audit-seal.json) is in the backup,
// copied before the database, so that a restore finds a record no newer
// than the chain: the copy is verified against it. A data folder whose
// record the database contradicts (a chain rewritten after the seal it
// names) is not backed up. Before, the record was left behind, and a
// node restored from the backup had none.
func TestRunCarriesTheSealRecord(t *testing.T) {
	cfg := dataDir(t, 3)
	ctx := context.Background()
	db, log := signedLog(t, cfg)
	defer db.Close()
	defer log.Close()
	s, err := log.Seal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Run(ctx, cfg, out, opts())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
		if f.Name == "audit-seal.json" && f.Kind != backup.KindSealRecord {
			t.Errorf("audit-seal.json: kind %q, want %q", f.Kind, backup.KindSealRecord)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "audit-seal.json") {
		t.Fatalf("files %v: want audit-seal.json", names)
	}
	if names[len(names)-1] == "audit-seal.json" || strings.Index(strings.Join(names, " "), "audit-seal.json") > strings.Index(strings.Join(names, " "), "tasks.db") {
		t.Errorf("files in the order %v: want the record copied before tasks.db", names)
	}
	if rec, err := audit.ReadSealRecord(filepath.Join(out, "audit-seal.json")); err != nil || rec.Seq != s.Seq {
		t.Fatalf("the copied record: %+v, %v; want entry %d", rec, err, s.Seq)
	}

	// The seal deleted and the head moved back: the chain verifies, the
	// record says it was cut.
	if _, err := db.W.ExecContext(ctx, "DELETE FROM audit_log WHERE seq = ?", s.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctx, "UPDATE audit_head SET last_seq = ?, last_hash = ?", s.Head.Seq, s.Head.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Verify(ctx); err != nil {
		t.Fatalf("the cut chain, without the record: %v", err)
	}
	if _, err := backup.Run(ctx, cfg, filepath.Join(t.TempDir(), "backup"), opts()); !errors.Is(err, audit.ErrTampered) {
		t.Fatalf("backup of a log that does not hold the recorded seal: %v; want audit.ErrTampered", err)
	}
}

// A task database that records another node's address than the key's
// is refused by the backup, not only by --check: a node with that key
// does not start on it, so the backup could never be restored, and its
// operator would learn so only when restoring.
func TestRunRefusesAnotherNodesDatabase(t *testing.T) {
	cfg := dataDir(t, 1)
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	owner := other.Address(identity.Mainnet)
	// What the node records at its first start on a database.
	execOn(t, cfg.DatabaseDSN(), "CREATE TABLE node_identity (id INTEGER PRIMARY KEY CHECK (id = 1), address TEXT NOT NULL, recorded_at INTEGER NOT NULL); "+
		"INSERT INTO node_identity VALUES (1, '"+owner+"', 0)")
	out := filepath.Join(t.TempDir(), "backup")
	_, err = backup.Run(context.Background(), cfg, out, opts())
	if err == nil || !strings.Contains(err.Error(), "the database belongs to "+owner) {
		t.Fatalf("Run = %v; want the refusal of a database of %s", err, owner)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the output folder exists after the refusal: %v", err)
	}
}

// Two backups into one folder at once (a timer's and a hand-run one of
// the same day): the second starts once the first has made the folder
// and found it empty, before it copies anything. Each that returns
// without an error leaves a backup Check passes: the other removes
// none of its files.
func TestRunTwiceIntoOneFolder(t *testing.T) {
	cfg, _ := sealedBackup(t) // with a record of the last seal, copied first
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "backup")
	second := errors.New("the second backup did not run")
	_, first := backup.Run(ctx, cfg, out, backup.WithRunStep(opts(), func(step string) {
		if step == "out" {
			_, second = backup.Run(ctx, cfg, out, opts())
		}
	}))
	if (first == nil) == (second == nil) {
		t.Fatalf("the first backup returned %v, the second %v: want one to write the folder, the other refused", first, second)
	}
	if !errors.Is(first, backup.ErrBusy) && !errors.Is(second, backup.ErrBusy) {
		t.Errorf("the one refused returned %v, want ErrBusy", errors.Join(first, second))
	}
	if _, err := backup.Check(ctx, cfg, out); err != nil {
		t.Errorf("the backup that returned without an error: %v", err)
	}
}

// A check or a restore of a folder a backup is being written into says
// so, and the restore changes nothing.
func TestCheckWhileRunWrites(t *testing.T) {
	cfg, _ := sealedBackup(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "backup")
	var checked, restored error
	if _, err := backup.Run(ctx, cfg, out, backup.WithRunStep(opts(), func(step string) {
		if step == "out" {
			_, checked = backup.Check(ctx, cfg, out)
			_, restored = backup.Restore(ctx, cfg, out, backup.RestoreOptions{})
		}
	})); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(checked, backup.ErrBusy) || !errors.Is(restored, backup.ErrBusy) {
		t.Errorf("during the backup, the check returned %v, the restore %v; want ErrBusy", checked, restored)
	}
}
