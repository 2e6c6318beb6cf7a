package snapnostr

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// deferrals are the requests an Inbox left to another replica (Shares),
// in the order they came (so their deadlines ascend), bounded in number
// and in bytes of content. Safe for concurrent use.
type deferrals struct {
	mu              sync.Mutex
	list            []deferral
	bytes           int
	maxLen, maxSize int
	// kept counts the requests kept aside, taken those taken up here
	// after all, left those forgotten once their grace passed.
	kept, taken, left atomic.Int64
}

type deferral struct {
	id       [32]byte
	ev       *nostr.Event
	until    time.Time
	size     int
	verified bool // its id and signature checked
}

// eventSize is about what ev holds in memory.
func eventSize(ev *nostr.Event) int {
	n := 256 + len(ev.ID) + len(ev.PubKey) + len(ev.Sig) + len(ev.Content)
	for _, tag := range ev.Tags {
		for _, v := range tag {
			n += 16 + len(v)
		}
	}
	return n
}

func newDeferrals(maxLen, maxSize int) *deferrals {
	return &deferrals{maxLen: maxLen, maxSize: maxSize}
}

// add keeps ev, whose id is id, until until and reports true, or reports
// false when the bounds leave no room (the caller then takes the request
// itself). verified says whether ev's id and signature were checked.
func (d *deferrals) add(id [32]byte, ev *nostr.Event, until time.Time, verified bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	size := eventSize(ev)
	if len(d.list) >= d.maxLen || d.bytes+size > d.maxSize {
		return false
	}
	d.list = append(d.list, deferral{id: id, ev: ev, until: until, size: size, verified: verified})
	d.bytes += size
	d.kept.Add(1)
	return true
}

// review returns the requests that are now mine, and forgets, without
// returning them, those whose time passed before now (it returns how
// many); it keeps the rest.
func (d *deferrals) review(now time.Time, mine func([32]byte) bool) (take []deferral, left int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.list[:0]
	for _, e := range d.list {
		switch {
		case mine(e.id):
			take = append(take, e)
		case !now.Before(e.until):
			left++
		default:
			kept = append(kept, e)
			continue
		}
		d.bytes -= e.size
	}
	clear(d.list[len(kept):]) // no event held past its removal
	d.list = kept
	d.taken.Add(int64(len(take)))
	d.left.Add(int64(left))
	return take, left
}

// len is how many requests are kept aside now.
func (d *deferrals) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.list)
}

// ShareStats counts what an Inbox with Shares did with the requests that
// were not its own.
type ShareStats struct {
	Kept  int64 // kept aside for their owner
	Taken int64 // taken up here after all: their owner stopped receiving
	Left  int64 // forgotten once their grace passed: their owner had them
	Now   int   // kept aside now
}

// Shared returns the Inbox's ShareStats (all zero without Shares).
func (in *Inbox) Shared() ShareStats {
	d := in.deferred
	return ShareStats{Kept: d.kept.Load(), Taken: d.taken.Load(), Left: d.left.Load(), Now: d.len()}
}
