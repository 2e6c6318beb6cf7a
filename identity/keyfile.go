package identity

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/snapnode/snapnode/internal/readfile"
	"github.com/snapnode/snapnode/internal/syncdir"
)

// maxKeyFile bounds what LoadKeyFile reads: the secret's 64 hex
// characters and generous white space around them.
const maxKeyFile = 256

// EnvKey is the environment variable that may hold the secret in hex.
const EnvKey = "SNAPNODE_KEY"

// ErrKeyFilePermissions is returned by LoadKeyFile for a key file that other
// users could read or write.
var ErrKeyFilePermissions = errors.New("key file is accessible to other users")

// LoadKeyFile reads a key file: the secret as 64 hex characters, surrounding
// white space ignored. It refuses a file that group or others may access, and
// the error says how to fix it.
func LoadKeyFile(path string) (*Key, error) {
	// A FIFO or a device at the path would make a plain open wait (for a
	// writer) or a read go on without end: the file is opened without
	// waiting, and only a regular one is read. A symbolic link is followed
	// (a secret mounted by Kubernetes is one), and what it leads to is
	// checked.
	f, st, err := readfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	defer f.Close()
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("identity: %s has mode %04o: %w; run `chmod 600 %s`",
			path, perm, ErrKeyFilePermissions, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("identity: read %s: %w", path, err)
	}
	k, err := ParseKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("identity: %s: %w", path, err)
	}
	return k, nil
}

// ParseKeyFile reads the contents b of a key file as LoadKeyFile does:
// the secret as 64 hex characters, surrounding white space ignored, in no
// more than 256 bytes. It is for a key file read otherwise (from a
// backup, say), with no file's permissions to check.
func ParseKeyFile(b []byte) (*Key, error) {
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("over %d bytes: a key file holds the secret as 64 hex characters", maxKeyFile)
	}
	return FromHex(strings.TrimSpace(string(b)))
}

// SaveKeyFile writes k to a new file created with mode 0600. It never
// overwrites an existing file: losing a key loses an identity.
func SaveKeyFile(path string, k *Key) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("identity: %s exists; refusing to overwrite a key: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("identity: %w", err)
	}
	if _, err := f.WriteString(k.Hex() + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("identity: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("identity: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	// The file's name is in its folder: synced too, so that a power cut
	// just after cannot leave a node that has announced this identity to
	// make another at its next start.
	if err := syncdir.Sync(filepath.Dir(path)); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	return nil
}

// FromEnv returns the key held in SNAPNODE_KEY, or (nil, nil) when the
// variable is unset or empty.
func FromEnv() (*Key, error) {
	v := strings.TrimSpace(os.Getenv(EnvKey))
	if v == "" {
		return nil, nil
	}
	k, err := FromHex(v)
	if err != nil {
		return nil, fmt.Errorf("identity: %s: %w", EnvKey, err)
	}
	return k, nil
}

// ErrNoKey is returned by Load when neither a file nor SNAPNODE_KEY names a
// key.
var ErrNoKey = errors.New("no key: give a key file or set " + EnvKey)

// Load returns the key in the file at path, or, when path is empty, the
// key in SNAPNODE_KEY; ErrNoKey when there is neither.
func Load(path string) (*Key, error) {
	if path != "" {
		return LoadKeyFile(path)
	}
	k, err := FromEnv()
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, ErrNoKey
	}
	return k, nil
}
