//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// renameNoReplace renames from to to, two names in the directory d,
// unless to exists (fs.ErrExist): linkRename.
func renameNoReplace(d *os.Root, from, to string) error { return linkRename(d, from, to, nil) }

// exchange cannot swap two files in one step here.
func exchange(*os.Root, string, string) error { return errors.ErrUnsupported }

// renameExcl cannot rename without replacing in one step here.
func renameExcl(*os.Root, string, string) error { return errors.ErrUnsupported }
