package embedded

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// subscription is one REQ of one connection.
type subscription struct {
	c       *conn
	id      string
	filters []*filter
	prefix  []byte // `["EVENT",<id>,`

	mu      sync.Mutex
	closed  bool
	pending bool                // stored events not all sent yet: buffer live ones
	buf     []bufferedEvent     // live events that arrived while pending
	entries []*indexEntry       // where the hub indexes this subscription
	sent    map[string]struct{} // ids sent as stored events (set before the flip)
}

type bufferedEvent struct {
	id  string
	msg []byte
}

func newSubscription(c *conn, id string, filters []*filter) *subscription {
	q, _ := json.Marshal(id) // a string always marshals
	prefix := make([]byte, 0, len(`["EVENT",,`)+len(q))
	prefix = append(prefix, `["EVENT",`...)
	prefix = append(prefix, q...)
	prefix = append(prefix, ',')
	return &subscription{c: c, id: id, filters: filters, prefix: prefix, pending: true}
}

// eventMessage is the EVENT message carrying raw for this subscription.
func (s *subscription) eventMessage(raw []byte) []byte {
	msg := make([]byte, 0, len(s.prefix)+len(raw)+1)
	msg = append(msg, s.prefix...)
	msg = append(msg, raw...)
	return append(msg, ']')
}

func (s *subscription) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// deliver hands a live event to the subscription: buffered while its
// stored events are being sent, else queued on the connection without
// blocking.
func (s *subscription) deliver(id string, raw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	msg := s.eventMessage(raw)
	if s.pending {
		if len(s.buf) >= s.c.r.cfg.SendQueue {
			s.c.slow()
			return
		}
		s.buf = append(s.buf, bufferedEvent{id: id, msg: msg})
		return
	}
	s.c.sendLive(s, msg)
}

// flip ends the stored phase: it returns the buffered live events not
// already sent as stored ones, in arrival order. Called by the writer,
// which writes them before anything queued later.
func (s *subscription) flip() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = false
	var out [][]byte
	for _, b := range s.buf {
		if _, dup := s.sent[b.id]; !dup {
			out = append(out, b.msg)
		}
	}
	s.buf, s.sent = nil, nil
	return out
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

// broadcast delivers ev (whose JSON is raw) to every subscription with a
// matching filter, once per subscription. It never blocks on a
// connection.
func (h *hub) broadcast(ev *nostr.Event, raw []byte) {
	var targets []*subscription
	seen := make(map[*subscription]struct{})
	try := func(k indexKey) {
		for e := range h.index[k] {
			if _, done := seen[e.sub]; done {
				continue
			}
			if e.f.matches(ev) {
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
	for _, t := range ev.Tags {
		if len(t) >= 2 {
			try(indexKey{dim: dimTag, name: t[0], value: t[1]})
		}
	}
	h.mu.RUnlock()
	for _, s := range targets {
		s.deliver(ev.ID, raw)
	}
}

// size is the number of index keys (for tests).
func (h *hub) size() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.index)
}
