package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// spelling is what probeFolds found of the workspace folder.
type spelling struct {
	folds bool   // its file system finds names under other spellings
	dev   uint64 // the device of its file system
	known bool   // dev is known
}

// onDevice reports whether fi, a directory, is on the folder's own file
// system. Off Unix, or when the folder's device is not known, none is.
func (sp *spelling) onDevice(fi fs.FileInfo) bool {
	dev, ok := deviceOf(fi)
	return ok && sp.known && dev == sp.dev
}

// probeFolds finds whether the file system of the folder d finds a name
// under another spelling than its own: in other letter case, or in
// another Unicode normal form (NFD for NFC). It makes a temporary file
// whose name has both a letter and an accented letter, looks for it
// spelled in capitals and decomposed, and removes it. A folder where the
// file cannot be made is taken as one that folds: every name is then
// checked against its directory, and so is one whose file went before
// the looks were done.
func (s *Sandbox) probeFolds(d *os.Root) *spelling {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return &spelling{folds: true}
	}
	name := ReservedPrefix + "probe-" + hex.EncodeToString(b[:]) + "-\u00e9"
	f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &spelling{folds: true}
	}
	defer d.Remove(name)
	made, err := f.Stat()
	f.Close()
	if err != nil {
		return &spelling{folds: true}
	}
	sp := &spelling{}
	sp.dev, sp.known = deviceOf(made)
	for _, other := range []string{strings.ToUpper(name), norm.NFD.String(name)} {
		if fi, err := d.Lstat(s.sysName(d, other)); err == nil && os.SameFile(fi, made) {
			sp.folds = true
		}
	}
	// A sweep of another process on the folder may have removed the
	// file meanwhile (it is not locked), and the looks found nothing.
	if fi, err := d.Lstat(name); err != nil || !os.SameFile(fi, made) {
		sp.folds = true
	}
	return sp
}

// spelled checks that name, as found in the directory d, is the name its
// entry is stored under: on a file system that folds names (see
// probeFolds), "SECRETS" finds secrets/, which a policy on
// "/sandbox/secrets/" does not cover. A name stored in another normal
// form but spelled in NFC is the same name (proposals and policies spell
// every path in NFC). A name that is not there is new, and keeps the
// spelling it is given. Where the file system does not fold (d.folds
// unset), a name found is the name stored, and nothing is read.
func (s *Sandbox) spelled(ctx context.Context, d dir, name string) error {
	if !d.folds {
		return nil
	}
	if _, err := d.r.Lstat(s.sysName(d.r, name)); err != nil {
		return nil // absent (a new name), or the caller's own error
	}
	found := false
	err := eachName(ctx, d.r, bare, func(n string) error {
		if n == name || (!ascii(n) && norm.NFC.String(n) == name) {
			found = true
			return errStop
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case !found:
		return ErrSpelling
	}
	return nil
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
