package testutil

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that goroutines may write while a test
// reads it: a log handler's or a child process's output, say. The zero
// value is empty, unbounded and ready to use.
type LockedBuffer struct {
	// Keep, when above 0, bounds what is kept: past it the older half
	// is dropped, so that about the last Keep bytes (enough to diagnose
	// a failure) stay whatever the output's length.
	Keep int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Keep > 0 && l.b.Len() > l.Keep {
		rest := l.b.Bytes()[l.b.Len()-l.Keep/2:]
		l.b = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return l.b.Write(p)
}

// String returns what is kept of what was written.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Len returns the number of bytes kept.
func (l *LockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
