package node

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// privateDataDir makes the data folder (identity, databases, admin
// socket) 0700, creating it, after ownDataDir found it this user's. A
// folder found with permissions for group or others (made by hand, copied,
// restored from a backup) is narrowed, with a warning naming it. Call it
// first, then lock the folder, then privateFiles. uid is the user the node
// runs as (os.Geteuid, or a test's).
func privateDataDir(cfg config.Config, uid int, logger *slog.Logger) error {
	if err := cfg.EnsureDataDir(); err != nil {
		return err
	}
	if runtime.GOOS != "windows" {
		if err := ownDataDir(cfg.DataDir, uid); err != nil {
			return err
		}
		fi, err := os.Stat(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("node: data folder: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("node: data folder: %w", err)
			}
			logger.Warn("the data folder was open to other users: set to 0700", "dir", cfg.DataDir, "was", fmt.Sprintf("%04o", perm))
		}
		warnOpenParents(cfg.DataDir, uid, logger)
	}
	return nil
}

// warnOpenParents warns about each folder above the data folder that a
// user other than the node's and root can change: one writable by others,
// or by a group other than the node's own (a user's private group, as
// Debian's umask 002 makes, is the user alone), without the sticky bit;
// or one owned by another user. Such a user could rename the data folder
// away and put one of their own (their key, their databases) in its place
// before the next start. sshd refuses a home folder like that; the node
// warns instead, because a volume's root is often group-writable
// (Kubernetes' fsGroup) and the data folder itself is checked and
// narrowed above. A folder it cannot stat is passed over.
func warnOpenParents(dir string, uid int, logger *slog.Logger) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	// The folders above the data folder's real place, and, when it is a
	// symbolic link, those above the link: whoever can change the link's
	// folder can put another link in its place.
	seen := map[string]bool{}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		warnOpenAbove(real, dir, uid, seen, logger)
	}
	warnOpenAbove(abs, dir, uid, seen, logger)
}

// warnOpenAbove warns, as warnOpenParents says, about each folder above
// path not in seen, and adds it to seen; uid is the node's user.
func warnOpenAbove(path, dir string, uid int, seen map[string]bool, logger *slog.Logger) {
	gid := os.Getegid()
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		if seen[p] {
			if filepath.Dir(p) == p {
				return
			}
			continue
		}
		seen[p] = true
		if fi, err := os.Stat(p); err == nil {
			mode := fi.Mode()
			o, g, known := ownerGroup(fi)
			writable := mode.Perm()&0o002 != 0 || mode.Perm()&0o020 != 0 && !(known && g == gid && o == uid)
			switch {
			case writable && mode&fs.ModeSticky == 0:
				logger.Warn("a folder above the data folder can be changed by other users: they could put a data folder of their own in place of this node's; remove group and others' write permission (chmod go-w)",
					"folder", p, "mode", fmt.Sprintf("%04o", mode.Perm()), "data_dir", dir)
			case known && o != uid && o != 0:
				logger.Warn("a folder above the data folder can be changed by other users: it belongs to another user, who could put a data folder of their own in place of this node's",
					"folder", p, "owner", o, "data_dir", dir)
			}
		}
		if filepath.Dir(p) == p {
			return
		}
	}
}

// privateFiles keeps each SQLite database of the node readable by its
// user only — tasks, inbox checkpoint and audit log; the embedded relay's;
// an older version's node.db while it is there —: 0600 with its -wal and
// -shm files, a file found open to group or others narrowed with a warning
// naming it. Call it once the data folder is this node's (privateDataDir,
// lockDataDir) and before the databases are opened.
func privateFiles(cfg config.Config, logger *slog.Logger) error {
	var dbs []string
	if old := filepath.Join(cfg.DataDir, "node.db"); fileExists(old) {
		dbs = append(dbs, old) // an older version's checkpoint, until deleted
	}
	if len(cfg.Relays) == 0 {
		dbs = append(dbs, filepath.Join(cfg.DataDir, "relay.db"))
	}
	if path, ok := sqldb.SQLitePath(cfg.DatabaseDSN()); ok && cfg.DatabaseDSN() != config.MemoryDatabase {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("node: database: %w", err)
		}
		dbs = append(dbs, path)
	}
	for _, db := range dbs {
		narrowed, err := sqldb.PrivateFiles(db)
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		for _, f := range narrowed {
			logger.Warn("a database file was open to other users: set to 0600", "file", f)
		}
	}
	return nil
}

// ownDataDir refuses a data folder that another user owns, or that is a
// symbolic link another user made (root's links aside): its owner could
// open it again at any time, whatever mode the node sets, and reach the
// admin socket or put a key or databases of its own there; a link could
// make the node narrow and fill a folder of the link maker's choosing.
// uid is the user the node runs as.
func ownDataDir(dir string, uid int) error {
	li, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("node: data folder: %w", err)
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		if o, ok := owner(li); ok && o != uid && o != 0 {
			return fmt.Errorf("node: the data folder (data_dir) %s is a symbolic link of another user (uid %d; the node runs as uid %d): want a folder of the node's own user, or a link it or root made", dir, o, uid)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("node: data folder: %w", err)
	}
	if o, ok := owner(fi); ok && o != uid {
		return fmt.Errorf("node: the data folder (data_dir) %s belongs to another user (uid %d; the node runs as uid %d): want a folder of the node's own user; chown it to that user, or give another --data-dir", dir, o, uid)
	}
	return nil
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sandboxApart refuses a workspace (dir, the sandbox folder, which
// exists) that holds one of the node's own files: the data folder (the
// identity, the databases, the admin socket), the key file, the SQLite
// database, the settings file, the agent's secret files. Any peer may
// READ_FILE the workspace under the default policy, so such a file would
// be handed to whoever asks (/sandbox/identity.key, the node's secret
// key). Each path, as written and with its symbolic links resolved, is
// compared folder by folder, up to the root, with the workspace itself
// (device and inode: another spelling, a link or a bind mount of it is
// the same folder). A path that does not exist yet is judged by the
// folders above it.
func sandboxApart(cfg config.Config, dir string) error {
	ws, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("node: sandbox: %w", err)
	}
	type named struct{ what, path string }
	own := []named{{"data folder (data_dir)", cfg.DataDir}, {"key file (key_file)", cfg.KeyPath()}}
	if path, ok := sqldb.SQLitePath(cfg.DatabaseDSN()); ok && cfg.DatabaseDSN() != config.MemoryDatabase {
		own = append(own, named{"database (database)", path})
	}
	for _, f := range []named{
		{"settings file (--config)", cfg.ConfigFile},
		{"API key file (agent.llm_api_key_file)", cfg.Agent.LLMAPIKeyFile},
		{"history key file (agent.history_key_file)", cfg.Agent.HistoryKeyFile},
	} {
		if f.path != "" {
			own = append(own, f)
		}
	}
	within := func(p string) bool {
		for {
			if fi, err := os.Stat(p); err == nil && os.SameFile(fi, ws) {
				return true
			}
			if filepath.Dir(p) == p {
				return false
			}
			p = filepath.Dir(p)
		}
	}
	for _, f := range own {
		abs, err := filepath.Abs(f.path)
		if err != nil {
			return fmt.Errorf("node: sandbox: %s %s: %w", f.what, f.path, err)
		}
		in := within(abs)
		if real, err := filepath.EvalSymlinks(abs); !in && err == nil {
			in = within(real)
		}
		if in {
			return fmt.Errorf("node: the sandbox folder (sandbox_dir) %s holds the node's %s %s: any peer may read the workspace, so it would read that too; give sandbox_dir a folder of its own, apart from the data folder and the node's files", dir, f.what, f.path)
		}
	}
	return nil
}
