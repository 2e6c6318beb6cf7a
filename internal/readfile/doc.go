// Package readfile reads the files a node is told to read (its settings,
// its policy) without waiting and without bound surprises: only a regular
// file is read, opened so that a FIFO or a device at the path does not
// block the open, and at most a given number of bytes.
//
//	b, err := readfile.Regular("/etc/snapnode/snapnode.toml", 1<<20)
//	if errors.Is(err, readfile.ErrTooLarge) { … }
package readfile
