package backup_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
)

// sealedBackup makes a node's data folder whose audit log its key sealed,
// with a policy file, backs it up and returns the settings and the
// backup folder.
func sealedBackup(t *testing.T) (config.Config, string) {
	t.Helper()
	cfg := dataDir(t, 4)
	cfg.Policy = filepath.Join(t.TempDir(), "mine.cedar")
	if err := os.WriteFile(cfg.Policy, []byte("permit(principal, action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, log := signedLog(t, cfg)
	if _, err := log.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(ctx, audit.Entry{Actor: address, Task: "t", Action: "a", Step: audit.StepReceived}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	db.Close()
	out := filepath.Join(t.TempDir(), "backup")
	if _, err := backup.Run(ctx, cfg, out, opts()); err != nil {
		t.Fatal(err)
	}
	return cfg, out
}

// editManifest changes the manifest of the backup out with edit, and
// gives every file the size and sum it now has, as someone who edits a
// backup by hand would.
func editManifest(t *testing.T, out string, edit func(*backup.Manifest)) {
	t.Helper()
	path := filepath.Join(out, backup.ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m backup.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&m)
	}
	for i := range m.Files {
		f := &m.Files[i]
		if b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(f.Name))); err == nil {
			sum := sha256.Sum256(b)
			f.Size, f.SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
		}
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// listing is every path below dir with its mode and size.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var l []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		l = append(l, fmt.Sprint(path, fi.Mode(), fi.Size(), fi.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCheckSound(t *testing.T) {
	cfg, out := sealedBackup(t)
	before := listing(t, out)
	m, err := backup.Check(context.Background(), cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Address != address || m.AuditEntries != 6 {
		t.Errorf("manifest %+v", m)
	}
	if after := listing(t, out); !slices.Equal(before, after) {
		t.Errorf("Check changed the backup folder:\n%v\n%v", before, after)
	}
}

// A backup cut short, damaged, or edited by hand, holding links or files
// of its own, or naming places to restore to that are not the node's, is
// refused before anything is copied back, the error naming what is
// wrong; and Check changes nothing in it.
func TestCheckRefuses(t *testing.T) {
	other, err := identity.FromHex(strings.Repeat("0b", 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		spoil  func(t *testing.T, cfg *config.Config, out, outside string)
		reason string
	}{
		{"no manifest", func(t *testing.T, _ *config.Config, out, outside string) {
			rm(t, filepath.Join(out, backup.ManifestName))
		}, "no manifest.json"},
		{"manifest cut short", func(t *testing.T, _ *config.Config, out, outside string) {
			truncate(t, filepath.Join(out, backup.ManifestName), 100)
		}, "manifest.json cannot be read"},
		{"manifest of a later format", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Format = 2 })
		}, "format 2"},
		{"tasks.db cut short", func(t *testing.T, _ *config.Config, out, outside string) {
			truncate(t, filepath.Join(out, "tasks.db"), 4096)
		}, "tasks.db is 4096 bytes"},
		{"tasks.db damaged", func(t *testing.T, _ *config.Config, out, outside string) {
			flip(t, filepath.Join(out, "tasks.db"), 5000)
		}, "tasks.db has SHA-256"},
		{"a name outside", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Files[0].Name = "../" + filepath.Base(out) + "/" + m.Files[0].Name })
		}, "not a plain path"},
		{"an absolute name", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Files[0].Name = filepath.ToSlash(filepath.Join(out, m.Files[0].Name)) })
		}, "not a plain path"},
		{"a source outside", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Files[0].Source = outside })
		}, "which is not where the node's settings have it read"},
		{"a policy the settings do not name", func(t *testing.T, cfg *config.Config, _, _ string) {
			cfg.Policy = ""
		}, "the node's settings name no policy file"},
		{"a link in place of a file", func(t *testing.T, _ *config.Config, out, outside string) {
			p := filepath.Join(out, "policy.cedar")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(outside, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rm(t, p)
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}, "policy.cedar is a symbolic link, not a regular file"},
		{"a file not in the manifest", func(t *testing.T, _ *config.Config, out, outside string) {
			if err := os.WriteFile(filepath.Join(out, "extra.sh"), []byte("#!/bin/sh\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "extra.sh is not in the manifest"},
		{"a link not in the manifest", func(t *testing.T, _ *config.Config, out, outside string) {
			if err := os.Symlink("/etc", filepath.Join(out, "etc")); err != nil {
				t.Fatal(err)
			}
		}, "etc is not in the manifest"},
		{"a file listed twice", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Files = append(m.Files, m.Files[0]) })
		}, "twice"},
		{"an audit entry edited, sums made again", func(t *testing.T, _ *config.Config, out, outside string) {
			execOn(t, filepath.Join(out, "tasks.db"), "UPDATE audit_log SET reason = 'nothing happened' WHERE seq = 2")
			editManifest(t, out, nil)
		}, "entry 2"},
		{"the last audit entries removed, sums made again", func(t *testing.T, _ *config.Config, out, outside string) {
			execOn(t, filepath.Join(out, "tasks.db"), "DELETE FROM audit_log WHERE seq = 6")
			editManifest(t, out, nil)
		}, "tasks.db"},
		{"the audit head edited in the manifest", func(t *testing.T, _ *config.Config, out, outside string) {
			editManifest(t, out, func(m *backup.Manifest) { m.Audit.Seq--; m.AuditEntries-- })
		}, "the manifest says 5"},
		{"another key", func(t *testing.T, _ *config.Config, out, outside string) {
			p := filepath.Join(out, "identity.key")
			rm(t, p)
			if err := identity.SaveKeyFile(p, other); err != nil {
				t.Fatal(err)
			}
			editManifest(t, out, nil)
		}, "identity.key is the key of " + other.Address(identity.Mainnet)},
		{"another key and address", func(t *testing.T, _ *config.Config, out, outside string) {
			p := filepath.Join(out, "identity.key")
			rm(t, p)
			if err := identity.SaveKeyFile(p, other); err != nil {
				t.Fatal(err)
			}
			editManifest(t, out, func(m *backup.Manifest) { m.Address = other.Address(identity.Mainnet) })
		}, "signed by " + address},
		{"a database another node's", func(t *testing.T, _ *config.Config, out, outside string) {
			// What the node records at its first start on a database.
			execOn(t, filepath.Join(out, "tasks.db"), "CREATE TABLE node_identity (id INTEGER PRIMARY KEY CHECK (id = 1), address TEXT NOT NULL, recorded_at INTEGER NOT NULL); "+
				"INSERT INTO node_identity VALUES (1, '"+other.Address(identity.Mainnet)+"', 0)")
			editManifest(t, out, nil)
		}, "tasks.db: the database belongs to " + other.Address(identity.Mainnet) + " (recorded at that node's first start on it), not to " + address},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, out := sealedBackup(t)
			outside := filepath.Join(t.TempDir(), "outside")
			c.spoil(t, &cfg, out, outside)
			before := listing(t, out)
			m, err := backup.Check(context.Background(), cfg, out)
			if !errors.Is(err, backup.ErrBad) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Check: %+v, %v; want backup.ErrBad naming %q", m, err, c.reason)
			}
			t.Log(err)
			if after := listing(t, out); !slices.Equal(before, after) {
				t.Errorf("Check changed the backup folder:\n%v\n%v", before, after)
			}
			if _, err := os.Stat(outside); err == nil && c.name != "a link in place of a file" {
				t.Errorf("Check wrote %s", outside)
			}
		})
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// execOn runs query on the SQLite database at path, as someone with the
// file would.
func execOn(t *testing.T, path, query string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// Check reads the key file into memory and never writes it out: neither
// the temporary folder (os.TempDir) nor the private folder it copies
// tasks.db into, in the data folder, holds a copy of the key at any of
// its steps, where a kill would leave it.
func TestCheckWritesNoKey(t *testing.T) {
	cfg, out := sealedBackup(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var steps []string
	seen := false
	look := func(step string) {
		// noKey reports a file that is the key or holds it.
		noKey := func(path string, d fs.DirEntry) error {
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if d.Name() == "identity.key" || strings.Contains(string(b), secret) {
				t.Errorf("at %q, %s holds the node's key", step, path)
			}
			return nil
		}
		err := filepath.WalkDir(cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || path == cfg.DataDir {
				return err
			}
			if filepath.Dir(path) == cfg.DataDir && d.IsDir() && strings.HasPrefix(d.Name(), ".backup-check-") {
				seen = true
			}
			if filepath.Dir(path) == cfg.DataDir && !d.IsDir() {
				return nil // the node's own files, its key among them
			}
			return noKey(path, d)
		})
		if err != nil {
			t.Errorf("at %q: %v", step, err)
		}
		err = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return noKey(path, d)
		})
		if err != nil {
			t.Errorf("at %q: %v", step, err)
		}
	}
	if _, err := backup.CheckWithStep(context.Background(), cfg, out, func(step string) {
		steps = append(steps, step)
		look(step)
	}); err != nil {
		t.Fatal(err)
	}
	look("after Check")
	if !slices.Contains(steps, "key identity.key") {
		t.Errorf("steps %q: the key was not checked", steps)
	}
	if !seen {
		t.Error("no step saw the private folder the copy of tasks.db is made in")
	}
}

// A check given settings whose data folder does not exist makes none:
// run as root it would be root's, a folder the node's user could not use;
// it says so instead. A restore, which checks first, makes it.
func TestCheckMissingDataFolder(t *testing.T) {
	cfg, out := sealedBackup(t)
	if err := os.Rename(cfg.DataDir, cfg.DataDir+".moved"); err != nil {
		t.Fatal(err)
	}
	_, err := backup.Check(context.Background(), cfg, out)
	if err == nil || !strings.Contains(err.Error(), cfg.DataDir) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("the check returned %v, want an error saying the data folder %s does not exist", err, cfg.DataDir)
	}
	if _, err := os.Lstat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the check made the data folder: %v", err)
	}
	if _, err := backup.Restore(context.Background(), cfg, out, backup.RestoreOptions{}); err != nil {
		t.Fatalf("the restore into a missing data folder: %v", err)
	}
}
