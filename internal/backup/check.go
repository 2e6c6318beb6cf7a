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
	"os"
	"path/filepath"
	"strings"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
)

// ErrBad: the folder given to Check is not a backup that can be restored
// as it is for the node cfg describes; the error names the first problem.
var ErrBad = errors.New("backup: not a sound backup")

// maxManifest bounds the manifest Check reads.
const maxManifest = 1 << 20

// Check checks that the backup folder dir can be restored for the node
// that cfg describes, before anything is copied back, and returns its
// manifest; errors.Is(err, ErrBad) when it cannot, the error naming the
// first problem:
//
//   - manifest.json is a regular file, holding one manifest of this
//     format and nothing else;
//   - every file it lists is a regular file (no symbolic link) in dir,
//     named by a local path (no "..", not absolute), listed once, of the
//     size and SHA-256 the manifest says; dir holds no other file;
//   - every file's source is where cfg has the node read that kind of
//     file (its database, key, record of the last seal, policy and
//     configuration files, its relay.db and agent.id in the data folder):
//     a restore that copies each file to its source writes nowhere else;
//   - the key file is the identity of the manifest's address (or, when
//     the manifest says the key was SNAPNODE_KEY, that SNAPNODE_KEY is),
//     the key read into memory and never written anywhere;
//   - a copy of tasks.db, made in a private folder (0700) of the data
//     folder (which must exist: Check makes none) and opened there,
//     passes SQLite's integrity check, and its audit chain verifies,
//     against the backup's record of the last seal when it has one, to
//     the manifest's head and number of entries. The folder is removed
//     when Check returns; one a killed check left is removed by the next
//     check or restore, or by the node's start.
//
// Check writes nothing in dir. It holds a shared lock on dir while it
// reads it: ErrBusy while Run writes a backup there.
func Check(ctx context.Context, cfg config.Config, dir string) (*Manifest, error) {
	return check(ctx, cfg, dir, func(string) {})
}

// check is Check; step, for tests, is called after each file's sum is
// checked ("sum NAME"), after the key file's address is ("key NAME"),
// once the copies the chain is verified on are made ("copied") and after
// the chain is ("chain").
func check(ctx context.Context, cfg config.Config, dir string, step func(string)) (*Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer root.Close()
	unlock, err := lockBackup(dir, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := readManifest(root)
	if err != nil {
		return nil, err
	}
	want, err := sourcesOf(cfg)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{ManifestName: true}
	var tasks, record *File
	seenSource := map[string]string{}
	for i := range m.Files {
		f := &m.Files[i]
		name := filepath.FromSlash(f.Name)
		if f.Name == "" || !filepath.IsLocal(name) || filepath.ToSlash(filepath.Clean(name)) != f.Name {
			return nil, fmt.Errorf("%w: the manifest lists a file named %q: not a plain path inside the backup folder", ErrBad, f.Name)
		}
		if listed[f.Name] {
			return nil, fmt.Errorf("%w: the manifest lists %s twice (or names the manifest)", ErrBad, f.Name)
		}
		listed[f.Name] = true
		if err := checkSource(*f, want); err != nil {
			return nil, err
		}
		if prev, dup := seenSource[f.Source]; dup {
			return nil, fmt.Errorf("%w: %s and %s would both be restored to %s", ErrBad, prev, f.Name, f.Source)
		}
		seenSource[f.Source] = f.Name
		if err := checkFile(root, *f); err != nil {
			return nil, err
		}
		step("sum " + f.Name)
		switch {
		case f.Kind == KindDatabase && f.Source == want.tasks:
			tasks = f
		case f.Kind == KindSealRecord:
			record = f
		case f.Kind == KindKey:
			if err := checkKey(root, *f, m.Address, cfg, step); err != nil {
				return nil, err
			}
		}
	}
	if tasks == nil {
		return nil, fmt.Errorf("%w: the manifest lists no task database restored to %s", ErrBad, want.tasks)
	}
	if m.KeyInEnvironment {
		if err := checkEnvKey(m.Address, cfg); err != nil {
			return nil, err
		}
	} else if _, ok := seenSource[want.key]; !ok {
		return nil, fmt.Errorf("%w: the manifest lists no key file restored to %s (nor says the key was SNAPNODE_KEY)", ErrBad, want.key)
	}
	if err := fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !listed[path] {
			return fmt.Errorf("%w: %s is not in the manifest", ErrBad, filepath.Join(dir, filepath.FromSlash(path)))
		}
		return nil
	}); err != nil {
		if errors.Is(err, ErrBad) {
			return nil, err
		}
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := checkChain(ctx, cfg.DataDir, root, m, tasks, record, step); err != nil {
		return nil, err
	}
	step("chain")
	return m, nil
}

// readManifest reads and decodes dir's manifest strictly.
func readManifest(root *os.Root) (*Manifest, error) {
	fi, err := root.Lstat(ManifestName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no %s: a folder without one is not a backup (or not a finished one)", ErrBad, ManifestName)
	case err != nil:
		return nil, fmt.Errorf("backup: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is %s, not a regular file", ErrBad, ManifestName, what(fi.Mode()))
	}
	f, err := root.Open(ManifestName)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("backup: %s: %w", ManifestName, err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrBad, ManifestName, maxManifest)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s cannot be read (cut short or edited?): %v", ErrBad, ManifestName, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s holds more than one manifest", ErrBad, ManifestName)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: %s is of format %d; this version reads format %d", ErrBad, ManifestName, m.Format, Format)
	}
	return &m, nil
}

// wantSources are the absolute paths cfg has the node read each kind of
// file from.
type wantSources struct {
	tasks, relay, key, record, agentID, policy, config string
}

func sourcesOf(cfg config.Config) (wantSources, error) {
	var w wantSources
	dbPath, err := databasePath(cfg)
	if err != nil {
		return w, err
	}
	for _, p := range []struct {
		dst  *string
		path string
	}{
		{&w.tasks, dbPath},
		{&w.relay, filepath.Join(cfg.DataDir, "relay.db")},
		{&w.key, cfg.KeyPath()},
		{&w.record, cfg.SealRecordPath()},
		{&w.agentID, filepath.Join(cfg.DataDir, "agent.id")},
		{&w.policy, cfg.Policy},
		{&w.config, cfg.ConfigFile},
	} {
		if p.path == "" {
			continue
		}
		if *p.dst, err = filepath.Abs(p.path); err != nil {
			return w, fmt.Errorf("backup: %w", err)
		}
	}
	return w, nil
}

// checkSource refuses a file whose source is not where the node reads
// that kind of file.
func checkSource(f File, w wantSources) error {
	var ok []string
	switch f.Kind {
	case KindDatabase:
		ok = []string{w.tasks, w.relay}
	case KindKey:
		ok = []string{w.key}
	case KindSealRecord:
		ok = []string{w.record}
	case KindAgentID:
		ok = []string{w.agentID}
	case KindPolicy:
		ok = []string{w.policy}
	case KindConfig:
		ok = []string{w.config}
	default:
		return fmt.Errorf("%w: %s is of an unknown kind %q", ErrBad, f.Name, f.Kind)
	}
	for _, p := range ok {
		if p != "" && f.Source == p {
			return nil
		}
	}
	if len(ok) == 1 && ok[0] == "" {
		return fmt.Errorf("%w: %s (%s) would be restored to %s, but the node's settings name no %s file: give them (--policy, --config) as the node has them", ErrBad, f.Name, f.Kind, f.Source, f.Kind)
	}
	return fmt.Errorf("%w: %s (%s) would be restored to %s, which is not where the node's settings have it read that file (%s): give the node's settings, or check the manifest was not edited", ErrBad, f.Name, f.Kind, f.Source, firstNonEmpty(ok))
}

func firstNonEmpty(ps []string) string {
	for _, p := range ps {
		if p != "" {
			return p
		}
	}
	return ""
}

// checkFile checks that f is a regular file in root of its size and sum.
func checkFile(root *os.Root, f File) error {
	name := filepath.FromSlash(f.Name)
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s is missing", ErrBad, f.Name)
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrBad, f.Name, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is %s, not a regular file: a backup holds none", ErrBad, f.Name, what(fi.Mode()))
	case fi.Size() != f.Size:
		return fmt.Errorf("%w: %s is %d bytes, the manifest says %d (cut short, or changed since the backup)", ErrBad, f.Name, fi.Size(), f.Size)
	}
	in, err := root.Open(name)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return fmt.Errorf("backup: %s: %w", f.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %s has SHA-256 %s, the manifest says %s (damaged, or changed since the backup)", ErrBad, f.Name, got, f.SHA256)
	}
	return nil
}

// what names the type of a file that is not a regular one.
func what(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	default:
		return "a special file (" + m.Type().String() + ")"
	}
}

// maxKeyRead bounds the key file checkKey reads: one holds 64 hex
// characters and some white space.
const maxKeyRead = 4 << 10

// checkKey checks that the key file f in root is the identity of the
// manifest's address. The key is read into memory, summed and parsed
// there, and never written out: a check killed midway leaves no copy of
// it behind.
func checkKey(root *os.Root, f File, address string, cfg config.Config, step func(string)) error {
	if f.Size > maxKeyRead {
		return fmt.Errorf("%w: %s is %d bytes: a key file holds the secret as 64 hex characters", ErrBad, f.Name, f.Size)
	}
	b, err := readOut(root, f)
	if err != nil {
		return err
	}
	defer clear(b)
	k, err := identity.ParseKeyFile(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBad, f.Name, err)
	}
	if got := k.Address(network(cfg)); got != address {
		return fmt.Errorf("%w: %s is the key of %s, the manifest says the node was %s", ErrBad, f.Name, got, address)
	}
	step("key " + f.Name)
	return nil
}

// checkEnvKey checks that SNAPNODE_KEY is the manifest's address, for a
// backup of a node whose key it was.
func checkEnvKey(address string, cfg config.Config) error {
	k, err := identity.FromEnv()
	switch {
	case err != nil:
		return fmt.Errorf("backup: %w", err)
	case k == nil:
		return fmt.Errorf("%w: the node's key was %s, not in the backup, and %s is not set: set it to the key of %s", ErrBad, identity.EnvKey, identity.EnvKey, address)
	case k.Address(network(cfg)) != address:
		return fmt.Errorf("%w: %s is the key of %s, the backup is of %s", ErrBad, identity.EnvKey, k.Address(network(cfg)), address)
	}
	return nil
}

// checkChain verifies a copy of the backup's tasks.db, made outside the
// backup, against its record of the last seal and the manifest's head.
// The copies are of the manifest's sums, the bytes a restore writes.
// They hold the node's whole history: they are made in a private folder
// of the data folder (see scratchDir), beside the database they copy,
// not in a temporary folder others share, where a kill would leave them.
func checkChain(ctx context.Context, dataDir string, root *os.Root, m *Manifest, tasks, record *File, step func(string)) error {
	tmp, done, err := scratchDir(dataDir)
	if err != nil {
		return err
	}
	defer done()
	db := filepath.Join(tmp, "tasks.db")
	if err := copyOut(root, *tasks, db); err != nil {
		return err
	}
	if err := checkDatabase(ctx, db); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrBad, tasks.Name, strings.TrimPrefix(err.Error(), "backup: "))
	}
	rec := ""
	if record != nil {
		rec = filepath.Join(tmp, "audit-seal.json")
		if err := copyOut(root, *record, rec); err != nil {
			return err
		}
	}
	step("copied")
	head, n, err := verifyTasks(ctx, db, rec, m.Address)
	if err != nil {
		return fmt.Errorf("%w: %s: %s", ErrBad, tasks.Name, strings.TrimPrefix(err.Error(), "backup: "))
	}
	if head != m.Audit || n != m.AuditEntries {
		return fmt.Errorf("%w: the audit log of %s ends at entry %d (%s) with %d entries; the manifest says %d (%s) with %d", ErrBad, tasks.Name, head.Seq, head.Hash, n, m.Audit.Seq, m.Audit.Hash, m.AuditEntries)
	}
	return nil
}

// readOut reads the file f of root into memory. What it returns must be
// of f's size and sum once more, so that what is verified on it is what
// checkFile summed and a restore writes (ErrBad when the file changed
// meanwhile).
func readOut(root *os.Root, f File) ([]byte, error) {
	in, err := root.Open(filepath.FromSlash(f.Name))
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	b, err := io.ReadAll(io.LimitReader(in, f.Size+1))
	if err != nil {
		clear(b)
		return nil, fmt.Errorf("backup: %s: %w", f.Name, err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
		clear(b)
		return nil, fmt.Errorf("%w: %s changed while it was checked (SHA-256 %x, the manifest says %s)", ErrBad, f.Name, sum, f.SHA256)
	}
	return b, nil
}

// copyOut copies the file f of root to the new file dst (0600), a
// temporary copy: not synced. The copy must be of f's size and sum once
// more, so that what is verified on it is what checkFile summed and a
// restore writes (ErrBad when the file changed meanwhile).
func copyOut(root *os.Root, f File, dst string) error {
	in, err := root.Open(filepath.FromSlash(f.Name))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	if err := writeNew(dst, io.TeeReader(io.LimitReader(in, f.Size+1), h), f.Name); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%w: %s changed while it was checked (SHA-256 %s, the manifest says %s)", ErrBad, f.Name, got, f.SHA256)
	}
	return nil
}
