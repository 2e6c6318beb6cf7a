package audittest

import (
	"context"
	"slices"
	"sync"

	"github.com/snapnode/snapnode/executor/audit"
)

// Recorder keeps the entries appended, in order. It is safe for
// concurrent use.
type Recorder struct {
	mu      sync.Mutex
	entries []audit.Entry
}

// Append records e and returns it as it was given.
func (r *Recorder) Append(_ context.Context, e audit.Entry) (audit.Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
	return e, nil
}

// Entries returns a copy of the entries recorded so far.
func (r *Recorder) Entries() []audit.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}
