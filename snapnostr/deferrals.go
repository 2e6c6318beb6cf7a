package snapnostr

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/relay"
)

// maxCopies bounds the copies of one unverified request kept aside: the
// same event from several relays, or a forged copy beside the genuine one.
const maxCopies = 3

// deferrals are the requests an Inbox left to another replica (Shares),
// one entry per event id, in the order they came (so their deadlines
// ascend), bounded in number and in bytes. Safe for concurrent use.
type deferrals struct {
	mu              sync.Mutex
	list            []*deferral
	byID            map[[32]byte]*deferral
	bytes           int
	maxLen, maxSize int
	// kept counts the requests kept aside, taken those taken up here
	// after all, left those forgotten because another process took them.
	kept, taken, left atomic.Int64
	// marks counts each request kept in flight (see watermark) from
	// the moment it is kept: the relay's point may pass it then. Whoever
	// removes it (review's caller) finishes or hands it over.
	marks *watermark
}

// deferral is one request kept aside: the copies that came, unverified
// (at most maxCopies, no two alike), or the one copy the pool verified.
type deferral struct {
	id       [32]byte
	evs      []*nostr.Event
	verified bool // evs[0] checked (and seen by take)
	// lateOnly: kept while the other replicas did not count this one
	// (Shares.Counted), so they took it between them; taken up only once
	// its time has passed, if no process took it, never as Mine.
	lateOnly bool
	until    time.Time
	size     int
}

// sameEvent reports whether a and b are the same event to the byte.
func sameEvent(a, b *nostr.Event) bool {
	return a.ID == b.ID && a.Sig == b.Sig && a.PubKey == b.PubKey && a.CreatedAt == b.CreatedAt && a.Kind == b.Kind &&
		a.Content == b.Content && slices.EqualFunc(a.Tags, b.Tags, func(x, y nostr.Tag) bool { return slices.Equal(x, y) })
}

func newDeferrals(maxLen, maxSize int, marks *watermark) *deferrals {
	return &deferrals{maxLen: maxLen, maxSize: maxSize, byID: make(map[[32]byte]*deferral), marks: marks}
}

// addResult is what add did with a request.
type addResult int

const (
	kept    addResult = iota // kept (or a copy of one kept, nothing new)
	noRoom                   // past the bounds: the caller takes it itself
	tooMany                  // an unverified copy past maxCopies: the caller verifies it, and adds it as verified if it holds
)

// add keeps ev, whose id is id, until until (see addResult). verified says
// whether ev's id and signature were checked, lateOnly whether it is kept
// while the others did not count this replica (see deferral). A copy of a
// request kept already joins it (a verified copy replaces the unverified
// ones); a copy alike to one kept is dropped.
func (d *deferrals) add(id [32]byte, ev *nostr.Event, until time.Time, verified, lateOnly bool) addResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	size := int(relay.EventSize(ev))
	if e, ok := d.byID[id]; ok {
		e.lateOnly = e.lateOnly || lateOnly
		switch {
		case e.verified:
		case verified: // a checked copy replaces the unchecked ones, even one alike
			d.bytes += size - e.size
			e.evs, e.verified, e.size = []*nostr.Event{ev}, true, size
		case slices.ContainsFunc(e.evs, func(x *nostr.Event) bool { return sameEvent(x, ev) }):
		case len(e.evs) >= maxCopies:
			return tooMany
		case d.bytes+size > d.maxSize:
			return noRoom
		default:
			e.evs = append(e.evs, ev)
			e.size += size
			d.bytes += size
		}
		return kept
	}
	if len(d.list) >= d.maxLen || d.bytes+size > d.maxSize {
		return noRoom
	}
	e := &deferral{id: id, evs: []*nostr.Event{ev}, verified: verified, lateOnly: lateOnly, until: until, size: size}
	d.list = append(d.list, e)
	d.byID[id] = e
	d.bytes += size
	d.kept.Add(1)
	d.marks.accepted(e)
	return kept
}

// review removes and returns the requests that are now mine (but those
// kept lateOnly), and those whose time passed before now; it keeps the
// rest. The caller finishes each request returned in d.marks, or hands
// it over to the event it queues.
func (d *deferrals) review(now time.Time, mine func([32]byte) bool) (take, due []*deferral) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.list[:0]
	for _, e := range d.list {
		switch {
		case !e.lateOnly && mine(e.id):
			take = append(take, e)
		case !now.Before(e.until):
			due = append(due, e)
		default:
			kept = append(kept, e)
			continue
		}
		d.bytes -= e.size
		delete(d.byID, e.id)
	}
	clear(d.list[len(kept):]) // no event held past its removal
	d.list = kept
	return take, due
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
	Taken int64 // taken up here after all: their owner stopped receiving, or did not take them in time (not those that expired meanwhile: see Inbox.Expired)
	Left  int64 // forgotten once another process had taken them
	Now   int   // kept aside now
}

// Shared returns the Inbox's ShareStats (all zero without Shares).
func (in *Inbox) Shared() ShareStats {
	d := in.deferred
	return ShareStats{Kept: d.kept.Load(), Taken: d.taken.Load(), Left: d.left.Load(), Now: d.len()}
}
