//go:build !unix

package sandbox

import "os"

// rmdirIn removes the directory name of d. Here os.Root's Remove is all
// there is: a file put at the name since it was looked at would be
// removed with it (the sandbox refuses every file off Unix, see
// linkCount, so none of its own is at stake).
func rmdirIn(d *os.Root, name string) error { return bare(d.Remove(name)) }
