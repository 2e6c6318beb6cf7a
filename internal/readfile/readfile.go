package readfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrTooLarge is returned by Regular for a file over its bound.
var ErrTooLarge = errors.New("file too large")

// Open opens the file at path for reading without waiting (a FIFO's open
// waits for a writer) and returns it with its information if it is a
// regular file; a symbolic link is followed and what it leads to is
// checked. The caller closes the file.
func Open(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: want a regular file; got %v", path, fi.Mode().Type())
	}
	return f, fi, nil
}

// Regular returns the contents of the regular file at path, of at most
// max bytes: ErrTooLarge, naming the bound, for a longer one.
func Regular(path string, max int64) ([]byte, error) {
	f, _, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: over %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}
