package snap

import (
	"context"
	"errors"
	"time"

	"github.com/snapnode/snapnode/internal/bounded"
)

// ErrReplayStoreFull is returned by a bounded ReplayStore that cannot record
// another message before older records expire. The validator then refuses
// the message (5003) rather than forget an id it promised to remember.
var ErrReplayStoreFull = errors.New("replay store full")

// ErrRedelivered: the message was recorded before, carried by the same
// delivery (Inbound.Via): the one transport event reached this process
// twice, or reached another process sharing the replay store, which took
// it. Either way it has its answer already, or will have, and a Server
// stays silent rather than answer it twice.
var ErrRedelivered = errors.New("snap: delivery already taken")

// ReplayRecord is what a replay store keeps per (from, id).
type ReplayRecord struct {
	FirstSeen time.Time
	Expires   time.Time
	// Fingerprint is SHA-256(digest ‖ signature): equal fingerprints mean
	// a byte-for-byte replay of an authenticated message.
	Fingerprint [32]byte
	// Via names the delivery that carried the message first (a Nostr
	// event id), empty when the transport has no such name.
	Via string
}

// ReplayStore remembers the (from, id) of authenticated messages for at
// least the replay window. The validator records a pair only after its
// signature verifies, so forged messages cannot burn a sender's ids.
//
// Implementations must be safe for concurrent use, and Remember must be
// atomic: of two concurrent calls for one pair exactly one is fresh.
type ReplayStore interface {
	// Lookup returns the record of (from, id) if one is held and has not
	// expired at now.
	Lookup(ctx context.Context, from, id string, now time.Time) (ReplayRecord, bool, error)
	// Remember records (from, id) unless an unexpired record exists. It
	// returns fresh=true when it recorded, else the prior record.
	Remember(ctx context.Context, from, id string, rec ReplayRecord) (prior ReplayRecord, fresh bool, err error)
}

var _ ReplayStore = (*MemoryReplayStore)(nil)

// MemoryReplayStore is a bounded in-memory ReplayStore for a single process.
// Records are swept in the order they were made as they expire, with no
// goroutine: each Remember first drops the expired records at the head of
// the queue. Records must be given expiry times that grow with insertion,
// as the Validator's fixed retention does; a record that expires early is
// still treated as absent by Lookup and Remember.
type MemoryReplayStore struct {
	records *bounded.Expiring[string, ReplayRecord]
}

// DefaultReplayCapacity bounds a MemoryReplayStore made with capacity 0:
// a million records, about 300 MB at the largest ids, 120 s at 8,000
// messages a second.
const DefaultReplayCapacity = 1_000_000

// NewMemoryReplayStore returns a store that holds at most capacity records
// (DefaultReplayCapacity when capacity ≤ 0).
func NewMemoryReplayStore(capacity int) *MemoryReplayStore {
	return newMemoryReplayStore(capacity, false)
}

// NewAnswerReplayStore returns a store of at most capacity records
// (DefaultReplayCapacity when capacity ≤ 0) that, when full, forgets its
// oldest record instead of refusing. It is for a requester checking the
// answers to its own requests, never for an agent's requests: an answer is
// bound to the request it answers by its transport (the HTTP exchange, or
// the Nostr reply's tags naming the request's event), so an old answer
// replayed after its record was forgotten answers no request of ours,
// while a requester that refused answers once full would refuse genuine
// ones (a busy peer makes more than its capacity within the window).
func NewAnswerReplayStore(capacity int) *MemoryReplayStore {
	return newMemoryReplayStore(capacity, true)
}

func newMemoryReplayStore(capacity int, evictOldest bool) *MemoryReplayStore {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &MemoryReplayStore{records: bounded.NewExpiring[string, ReplayRecord](capacity, evictOldest)}
}

func replayKey(from, id string) string { return from + "\x00" + id }

// Lookup implements ReplayStore.
func (s *MemoryReplayStore) Lookup(_ context.Context, from, id string, now time.Time) (ReplayRecord, bool, error) {
	r, ok := s.records.Get(replayKey(from, id), now)
	return r, ok, nil
}

// Remember implements ReplayStore.
func (s *MemoryReplayStore) Remember(_ context.Context, from, id string, rec ReplayRecord) (ReplayRecord, bool, error) {
	prior, fresh, err := s.records.Add(replayKey(from, id), rec, rec.Expires, rec.FirstSeen)
	if errors.Is(err, bounded.ErrFull) {
		return ReplayRecord{}, false, ErrReplayStoreFull
	}
	return prior, fresh, err
}

// Len returns the number of records held, expired ones not yet swept
// included.
func (s *MemoryReplayStore) Len() int { return s.records.Len() }

// NextExpiry returns when the oldest record expires, the earliest moment
// a full store has room again.
func (s *MemoryReplayStore) NextExpiry() (time.Time, bool) { return s.records.NextExpiry() }
