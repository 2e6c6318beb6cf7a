//go:build !unix

package backup

import "io/fs"

// chownLike does nothing where files have no Unix owner.
func chownLike(string, fs.FileInfo) error { return nil }
