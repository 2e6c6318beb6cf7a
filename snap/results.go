package snap

import (
	"context"
	"time"

	"github.com/snapnode/snapnode/internal/bounded"
)

// ResultStore keeps the result of each message/send a Server answered,
// for the replay window, so that the same request arriving again — a
// peer's retry, after a restart, at another replica — gets the original
// result marked "deduplicated": true instead of 2006.
//
// Implementations must be safe for concurrent use. A durable store (one
// that outlives the process and is shared by replicas) belongs beside the
// durable ReplayStore; MemoryResultStore keeps results in memory.
type ResultStore interface {
	// SaveResult keeps result, a response payload, for (from, id) until
	// expires.
	SaveResult(ctx context.Context, from, id string, result []byte, expires time.Time) error
	// LoadResult returns the result kept for (from, id) if it has not
	// expired at now.
	LoadResult(ctx context.Context, from, id string, now time.Time) ([]byte, bool, error)
}

var _ ResultStore = (*MemoryResultStore)(nil)

// MemoryResultStore is a ResultStore in memory, bounded: when full it
// forgets the least recently used result, and a retry of that request gets
// 2006 rather than its result.
type MemoryResultStore struct {
	c *bounded.Cache[string, memoryResult]
}

type memoryResult struct {
	payload []byte
	expires time.Time
}

// NewMemoryResultStore returns a MemoryResultStore holding at most size
// results (at least 1).
func NewMemoryResultStore(size int) *MemoryResultStore {
	return &MemoryResultStore{c: bounded.NewCache[string, memoryResult](max(size, 1))}
}

// SaveResult implements ResultStore.
func (s *MemoryResultStore) SaveResult(_ context.Context, from, id string, result []byte, expires time.Time) error {
	s.c.Put(replayKey(from, id), memoryResult{payload: result, expires: expires})
	return nil
}

// LoadResult implements ResultStore.
func (s *MemoryResultStore) LoadResult(_ context.Context, from, id string, now time.Time) ([]byte, bool, error) {
	r, ok := s.c.Get(replayKey(from, id))
	if !ok || !now.Before(r.expires) {
		return nil, false, nil
	}
	return r.payload, true, nil
}

// keptKey is the context key of the result a message/send handler kept
// itself (ResultKept).
type keptKey struct{}

// keptResult is what ResultKept recorded for the request being served.
type keptResult struct{ payload []byte }

// ResultKept tells the Server answering the message/send request of ctx
// that the handler has already kept result — a response payload in its
// canonical form (Canonicalize) — as the request's result, in a write of
// its own (a durable store keeping the task and its request's result in
// one transaction). When the answer's payload is exactly result, the
// Server does not save it again; when it differs (the task changed
// since, or the transport shrank it) the Server saves the answer as it
// always does. It has no effect outside a message/send handler.
func ResultKept(ctx context.Context, result []byte) {
	if k, ok := ctx.Value(keptKey{}).(*keptResult); ok {
		k.payload = result
	}
}
