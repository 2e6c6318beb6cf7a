package embedded

import (
	"strconv"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// subscription is one REQ of one connection.
type subscription struct {
	c       *conn
	id      string
	filters []*filter
	values  int    // the values in filters' lists (see filter.valueCount)
	size    int64  // about the bytes s holds (see subscriptionSize)
	prefix  []byte // `["EVENT",<id>,`, for WebSocket clients

	mu      sync.Mutex
	closed  bool
	pending bool                // stored events not all sent yet: buffer live ones
	buf     []outItem           // live events that arrived while pending
	entries []*indexEntry       // where the hub indexes this subscription
	sent    map[string]struct{} // ids sent as stored events (set before the flip)
	// flipped is closed when the stored phase ends or the subscription
	// closes: a patient connection's publisher waits on it for room.
	flipped chan struct{}
	waiters int // publishers waiting on flipped: sent is kept for them
}

func newSubscription(c *conn, id string, filters []*filter) *subscription {
	prefix := make([]byte, 0, len(`["EVENT","",`)+len(id))
	prefix = appendJSONString(append(prefix, `["EVENT",`...), id)
	prefix = append(prefix, ',')
	values := 0
	for _, f := range filters {
		values += f.valueCount()
	}
	return &subscription{c: c, id: id, filters: filters, values: values, size: subscriptionSize(id, filters),
		prefix: prefix, pending: true, flipped: make(chan struct{})}
}

// filterBytes and valueBytes are about what a filter, and each value of
// its lists, hold beside the values' text while a subscription is open:
// the filter, its sets, the hub's index entries (measured: 4,000 values
// of 64 characters hold 1.9 MB, 1,024 filters without values 330 KB).
const (
	filterBytes = 320
	valueBytes  = 400
)

// subscriptionSize is about the bytes an open subscription of id and
// filters holds: the unit of Config.MaxSubscriptionBytesPerIP.
func subscriptionSize(id string, filters []*filter) int64 {
	n := int64(2*len(id)) + 512 // the id, the EVENT prefix, the subscription
	for _, f := range filters {
		n += filterBytes + int64(f.valueCount())*valueBytes
		for _, v := range f.ids {
			n += int64(len(v))
		}
		for _, v := range f.authors {
			n += int64(len(v))
		}
		for _, t := range f.tags {
			n += int64(len(t.name))
			for _, v := range t.values {
				n += int64(len(v))
			}
		}
	}
	return n
}

// endWait closes flipped once; s.mu is held.
func (s *subscription) endWait() {
	select {
	case <-s.flipped:
	default:
		close(s.flipped)
	}
}

// eventItem is the EVENT message carrying d, for the writer. A WebSocket
// client's event is encoded here, once for all its subscribers, by the
// goroutine that queues it (the publisher's, or the reader's for stored
// events); the writer frames it for its subscription as it writes it, so
// that the queues of a hundred slow subscribers hold one copy of an event,
// not a hundred.
func (s *subscription) eventItem(d *eventData) outItem {
	if s.c.t.sendsJSON() {
		_, _ = d.json()
	}
	return outItem{sub: s, msg: message{label: labelEvent, ref: s.id, ev: d}}
}

func (s *subscription) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// deliver hands a live event to the subscription: buffered while its
// stored events are being sent, else queued on the connection (see
// sendLive: a patient connection may make it wait). It does not hold
// s.mu while it queues: the writer takes s.mu for each item it writes,
// so a wait for room under s.mu would never end.
func (s *subscription) deliver(d *eventData) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	switch {
	case !s.pending:
		it := s.eventItem(d)
		s.mu.Unlock()
		s.c.sendLive(it)
	case len(s.buf) < s.c.r.cfg.SendQueue:
		s.buf = append(s.buf, s.eventItem(d))
		s.mu.Unlock()
	case s.c.patient:
		s.awaitFlip(d)
	default:
		s.mu.Unlock()
		s.c.slow()
	}
}

// awaitFlip delivers d, for which the stored phase's buffer has no room,
// once the phase is over; s.mu is held, and released. A patient
// connection (the node's own) is not cut for that buffer either: the
// publisher waits for the phase's end, up to WriteTimeout, as sendLive
// waits for room; a flood that stores events to prolong the phase then
// slows itself instead of cutting the node off.
func (s *subscription) awaitFlip(d *eventData) {
	flipped := s.flipped
	s.waiters++
	s.mu.Unlock()
	s.c.r.phaseWaits.Add(1)
	ok := s.c.await(flipped)
	s.mu.Lock()
	s.waiters--
	_, dup := s.sent[d.ev.ID] // sent as a stored event meanwhile
	if s.waiters == 0 && !s.pending {
		s.sent = nil
	}
	s.mu.Unlock()
	switch {
	case !ok:
		s.c.slow()
	case !dup:
		s.deliver(d) // the stored phase is over, or s closed
	}
}

// flip ends the stored phase: it returns the buffered live events not
// already sent as stored ones, in arrival order. Called by the writer,
// which writes them before anything queued later.
func (s *subscription) flip() []outItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = false
	s.endWait()
	var out []outItem
	for _, it := range s.buf {
		if _, dup := s.sent[it.msg.ev.ev.ID]; !dup {
			out = append(out, it)
		}
	}
	s.buf = nil
	if s.waiters == 0 {
		s.sent = nil
	}
	return out
}

// eventData is an event on its way to subscribers. A live event has ev,
// which nobody modifies once it is shared, and its JSON is encoded when
// first needed (by the store or a WebSocket client); a stored event is
// only its JSON. In-process clients get copies (event).
type eventData struct {
	ev   *nostr.Event
	once sync.Once
	raw  []byte
	err  error
}

func liveEvent(ev *nostr.Event) *eventData { return &eventData{ev: ev} }

func storedEventData(raw []byte) *eventData { return &eventData{raw: raw} }

// json is the event's JSON, encoded once.
func (d *eventData) json() ([]byte, error) {
	d.once.Do(func() {
		if d.raw == nil {
			d.raw, d.err = encodeEvent(d.ev)
		}
	})
	return d.raw, d.err
}

// event returns a copy of the event that shares no memory with the relay
// but its immutable strings: the recipient may modify it.
func (d *eventData) event() (*nostr.Event, error) {
	if d.ev == nil {
		var ev nostr.Event
		if err := ev.UnmarshalJSON(d.raw); err != nil {
			return nil, err
		}
		return &ev, nil
	}
	return copyEvent(d.ev), nil
}

// copyEvent copies ev deeply: every tag gets its own slice (all backed by
// one array, each capped so that an append cannot spill into the next).
// Unexported fields of nostr.Event are left out.
func copyEvent(ev *nostr.Event) *nostr.Event {
	cp := &nostr.Event{ID: ev.ID, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt, Kind: ev.Kind, Content: ev.Content, Sig: ev.Sig}
	if ev.Tags == nil {
		return cp
	}
	n := 0
	for _, t := range ev.Tags {
		n += len(t)
	}
	all := make([]string, 0, n)
	cp.Tags = make(nostr.Tags, len(ev.Tags))
	for i, t := range ev.Tags {
		start := len(all)
		all = append(all, t...)
		cp.Tags[i] = all[start:len(all):len(all)]
	}
	return cp
}

// indexKey is one value a filter is indexed under.
type indexKey struct {
	dim   byte // dimID, dimAuthor, dimKind, dimTag, or dimAll
	name  string
	value string
}

const (
	dimAll byte = iota
	dimID
	dimAuthor
	dimKind
	dimTag
)

// indexEntry is one filter of one subscription in the hub.
type indexEntry struct {
	sub  *subscription
	f    *filter
	keys []indexKey
}

// hub routes live events to subscriptions. Each filter is indexed under
// the values of its most selective field (ids, then its smallest tag
// condition, then authors, then kinds; a filter with none goes in a
// catch-all list), so an event is matched only against the filters that
// name one of its id, author, kind or tags, plus the catch-all ones.
type hub struct {
	mu    sync.RWMutex
	index map[indexKey]map[*indexEntry]struct{}
}

func newHub() *hub {
	return &hub{index: make(map[indexKey]map[*indexEntry]struct{})}
}

func keysFor(f *filter) []indexKey {
	switch {
	case f.ids != nil:
		return keysOf(dimID, "", f.ids)
	case len(f.tags) > 0:
		best := 0
		for i, t := range f.tags {
			if len(t.values) < len(f.tags[best].values) {
				best = i
			}
		}
		return keysOf(dimTag, f.tags[best].name, f.tags[best].values)
	case f.authors != nil:
		return keysOf(dimAuthor, "", f.authors)
	case f.kinds != nil:
		keys := make([]indexKey, len(f.kinds))
		for i, k := range f.kinds {
			keys[i] = indexKey{dim: dimKind, value: strconv.Itoa(k)}
		}
		return keys
	default:
		return []indexKey{{dim: dimAll}}
	}
}

func keysOf(dim byte, name string, values []string) []indexKey {
	keys := make([]indexKey, len(values))
	for i, v := range values {
		keys[i] = indexKey{dim: dim, name: name, value: v}
	}
	return keys
}

// add indexes every filter of s that can match something.
func (h *hub) add(s *subscription) {
	entries := make([]*indexEntry, 0, len(s.filters))
	for _, f := range s.filters {
		if f.matchesNothing() {
			continue
		}
		entries = append(entries, &indexEntry{sub: s, f: f, keys: keysFor(f)})
	}
	s.mu.Lock()
	s.entries = entries
	s.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range entries {
		for _, k := range e.keys {
			m := h.index[k]
			if m == nil {
				m = make(map[*indexEntry]struct{})
				h.index[k] = m
			}
			m[e] = struct{}{}
		}
	}
}

// remove closes s and takes it out of the index.
func (h *hub) remove(s *subscription) {
	s.mu.Lock()
	s.closed = true
	s.endWait()
	entries := s.entries
	s.entries, s.buf, s.sent = nil, nil, nil
	s.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range entries {
		for _, k := range e.keys {
			if m := h.index[k]; m != nil {
				delete(m, e)
				if len(m) == 0 {
					delete(h.index, k)
				}
			}
		}
	}
}

// broadcast delivers d to every subscription with a matching filter, once
// per subscription. Each filter is tried once, under the first of the
// event's keys it is indexed under: an event repeating a tag, or naming
// many of a filter's values, costs no more tries. It does not block on a
// connection, but for a patient one (the node's own), whose room it waits
// for up to WriteTimeout (see deliver and sendLive): the publisher, whose
// goroutine this is, slows.
func (h *hub) broadcast(d *eventData) {
	ev := d.ev
	tags := tagsOf(ev)
	var targets []*subscription
	seen := make(map[*subscription]struct{})
	// tried holds the entries indexed under several keys that were tried
	// (the event may name more than one of them); an entry under one key
	// is met once, the keys tried being distinct, and is not held.
	var tried map[*indexEntry]struct{}
	try := func(k indexKey) {
		for e := range h.index[k] {
			if _, done := seen[e.sub]; done {
				continue
			}
			if len(e.keys) > 1 {
				if _, done := tried[e]; done {
					continue
				}
				if tried == nil {
					tried = make(map[*indexEntry]struct{})
				}
				tried[e] = struct{}{}
			}
			if e.f.matches(ev, &tags) {
				seen[e.sub] = struct{}{}
				targets = append(targets, e.sub)
			}
		}
	}
	h.mu.RLock()
	try(indexKey{dim: dimAll})
	try(indexKey{dim: dimID, value: ev.ID})
	try(indexKey{dim: dimAuthor, value: ev.PubKey})
	try(indexKey{dim: dimKind, value: strconv.Itoa(ev.Kind)})
	for _, p := range tags.pairs {
		try(indexKey{dim: dimTag, name: p[0], value: p[1]})
	}
	h.mu.RUnlock()
	for _, s := range targets {
		s.deliver(d)
	}
}

// size is the number of index keys (for tests).
func (h *hub) size() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.index)
}
