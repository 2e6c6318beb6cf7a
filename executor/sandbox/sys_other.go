//go:build !unix

package sandbox

import "io/fs"

const openNonblock = 0

// linkCount cannot tell the hard links of a file here, so every file counts
// as linked (and is refused): the sandbox fails closed off Unix.
func linkCount(fs.FileInfo) (uint64, bool) { return 0, false }

// deviceOf cannot tell the device of a file here: every folder counts as
// on another file system, whose names are checked (see spelled).
func deviceOf(fs.FileInfo) (uint64, bool) { return 0, false }
