//go:build !unix

package snaphttp

// openFileLimit returns 0: the limit of open files is unknown here.
func openFileLimit() uint64 { return 0 }
