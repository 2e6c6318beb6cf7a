package relay

import (
	"strconv"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Catching up on a relay's stored events.
//
// NIP-01 lets a relay return fewer stored events than a filter matches:
// public relays cap a REQ's at a few hundred, the newest (created_at
// descending), and some cut below the filter's limit without a word. A
// subscription resuming a relay from its point after an outage longer
// than that cap's worth of traffic would get only the newest of the gap,
// then EOSE, and its point would move past the rest. So, for a REQ whose
// filter has a since and no limit (every resumption's), the stored
// events are read back a page at a time before EOSE counts: once the
// REQ's EOSE comes, if it brought an event, the relay is asked again,
// under another subscription id (the REQ's own stays open for the live
// events), for the same filter with until = the oldest created_at
// brought (inclusive, as NIP-01's until is: events sharing that second
// are not skipped, and those brought before are deduped by id); and so
// on while a page brings an event older than its until. A page that
// brings only events of its until's second, as many as the fullest answer
// of the relay in this catch-up, may have been cut within that second (it
// holds more events than the relay returns a REQ): the next page is asked
// until the second before, as the rest of that second cannot be asked
// for by created_at (logged), and the older events are still read. Only
// then does
// the relay's point move to the newest created_at it brought, live
// events of the meantime included (they are delivered as they come).
//
// On a relay that returns every stored event this costs one REQ more,
// which brings again the events of the oldest second only. A catch-up
// stops at MaxCatchUpPages, or when the relay refuses a page (CLOSED)
// for good (a page refused for a while is asked again after a backoff,
// each time counting as a page), or when the EOSE of the REQ or of a
// page does not come within EOSETimeout of asking (a relay that never
// sends it would keep the catch-up, and every event it brings, "stored"
// for the whole connection): it is logged and counted, and the relay's
// point does not move for the rest of that connection, its live events
// included (stored events older than them may not have come), so that
// neither a reconnect nor a subscriber keeping the point
// (Subscription.Resume) skips what was not read.

// pageSep separates a subscription's wire id from the serial of one of
// its catch-up pages; wire ids are "snap-" and base 36 digits.
const pageSep = ":"

// catchUp is where the reading of one relay's stored events for the
// current REQ of a subscription stands.
type catchUp struct {
	// base is the filter of the REQ when its stored events are paged
	// (it has a since and no limit), nil otherwise.
	base  *nostr.Filter
	state catchUpState
	pages int // pages asked for after the REQ
	// page is the wire id of the page awaited, until its until (while
	// state is catchUpPaging).
	page  string
	until nostr.Timestamp
	// brought: the REQ, or the page awaited, brought an event matching
	// the filter (before its EOSE); oldest is the oldest created_at of
	// those (at most now).
	brought bool
	oldest  nostr.Timestamp
	// n counts the events the REQ, or the page awaited, brought; most
	// the most that one of the catch-up's earlier answers brought (the
	// relay's cap, as far as seen).
	n, most int
	// refused counts the pages the relay refused for a while (see
	// pageRefused); held: page is one of them, to be asked again, and
	// what comes for it no longer counts.
	refused int
	held    bool
	// heard is when the REQ, or the page awaited, last brought an
	// event: its EOSE is awaited EOSETimeout from then (see eoseLate).
	heard time.Time
}

type catchUpState uint8

const (
	catchUpStored catchUpState = iota // the REQ's EOSE is awaited
	catchUpPaging                     // a page's EOSE is awaited
	catchUpCut                        // stopped short: the point stays
	catchUpDone                       // caught up: the relay is live
)

// pageAsk is a page to ask a relay for: REQ id with f. The zero pageAsk
// asks nothing.
type pageAsk struct {
	id string
	f  nostr.Filter
	// skipped: the page goes on from the second before the previous
	// page's until, which brought only events of that second, as many
	// as the relay returns: the rest of that second is not read.
	skipped bool
}

// startCatchUp begins the catch-up of relay idx for a REQ with filter f
// and returns the page still open from an earlier REQ on this
// connection, "" if none. s.mu is held.
func (s *Subscription) startCatchUp(idx int, f nostr.Filter) (stale string) {
	c := &s.catchUp[idx]
	if c.state == catchUpPaging && !c.held {
		stale = c.page
	}
	*c = catchUp{}
	if s.local == nil && f.Since != nil && f.Limit == 0 && !f.LimitZero {
		c.base = &f
	}
	return stale
}

// noteCatchUp counts an event created at at (at most now) that relay idx
// brought on page ("" for the REQ itself) toward its catch-up. s.mu is
// held.
func (s *Subscription) noteCatchUp(idx int, at nostr.Timestamp, page string) {
	c := &s.catchUp[idx]
	switch {
	case c.state == catchUpStored && page == "":
	case c.state == catchUpPaging && page == c.page && !c.held:
	default:
		return // a live event, or one of a page no longer awaited
	}
	if !c.brought || at < c.oldest {
		c.oldest = at
	}
	c.brought = true
	c.heard = s.p.cfg.Now()
	c.n++
}

// storedEnd acts on relay idx's EOSE for page ("" for its REQ), if its
// catch-up awaits it (awaited): it returns the next page to ask for, if
// any, and whether the catch-up was cut at the bound of pages. Otherwise
// the relay's stored events are all read: its point moves to the newest
// created_at it brought. Once the subscription has ended it does
// nothing: a stored event that came after the end was dropped unhanded
// (see deliver), and the point, moved, would pass it.
func (s *Subscription) storedEnd(idx int, page string) (next pageAsk, cut, awaited bool) {
	s.mu.Lock()
	c := &s.catchUp[idx]
	switch {
	case s.ended():
		s.mu.Unlock()
		return pageAsk{}, false, false
	case page == "" && c.state == catchUpStored:
		s.served[idx] = true
	case page != "" && c.state == catchUpPaging && page == c.page && !c.held:
	default: // a page no longer awaited, a second EOSE, or a late one
		s.mu.Unlock()
		return pageAsk{}, false, false
	}
	// A page brought something new for this relay if it reached further
	// back than its until; the REQ, if it brought anything.
	more := c.base != nil && c.brought && (c.state == catchUpStored || c.oldest < c.until)
	// A page of its until's second only, as full as the relay's fullest
	// answer: that second may hold more than the relay returns, and the
	// events before it are still to be read, from the second before.
	full := c.base != nil && c.brought && c.state == catchUpPaging && c.oldest == c.until && c.n >= c.most &&
		c.until > 0 && (c.base.Since == nil || c.until-1 >= *c.base.Since)
	if full {
		c.oldest--
	}
	switch {
	case (more || full) && c.pages < s.p.cfg.MaxCatchUpPages:
		c.pages++
		s.pageSerial++
		c.most = max(c.most, c.n)
		c.state, c.page, c.until, c.brought, c.n = catchUpPaging, s.wireID+pageSep+strconv.FormatUint(s.pageSerial, 36), c.oldest, false, 0
		next = pageAsk{id: c.page, f: c.base.Clone(), skipped: full}
		until := c.until
		next.f.Until = &until
		s.mu.Unlock()
		return next, false, true
	case more || full:
		c.state, c.page = catchUpCut, ""
		cut = true
	default:
		c.state, c.page = catchUpDone, ""
		s.live[idx] = true
		s.moveTo(idx, s.stored[idx])
		s.stored[idx] = 0
	}
	s.mu.Unlock()
	s.relayDone(idx)
	return pageAsk{}, cut, true
}

// awaits reports whether relay idx's catch-up awaits the EOSE of ask: its
// REQ's ("") or a page's. s.mu is held.
func (s *Subscription) awaits(idx int, ask string) bool {
	c := &s.catchUp[idx]
	if ask == "" {
		return c.state == catchUpStored
	}
	return c.state == catchUpPaging && c.page == ask && !c.held
}

// awaitsREQ reports whether relay idx's catch-up awaits its REQ's EOSE.
func (s *Subscription) awaitsREQ(idx int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.awaits(idx, "")
}

// eoseLate cuts relay idx's catch-up if it still awaits the EOSE of ask
// (its REQ's, "", or a page's), which did not come within EOSETimeout,
// and reports whether it did: the relay's point stays, and what it brings
// from now on is live (see storedNow). A relay still sending the events
// of ask is not cut: the EOSE is awaited timeout from the last of them,
// and again is what is left of that wait.
func (s *Subscription) eoseLate(idx int, ask string, timeout time.Duration) (cut bool, again time.Duration) {
	s.mu.Lock()
	if s.ended() || !s.awaits(idx, ask) {
		s.mu.Unlock()
		return false, 0
	}
	c := &s.catchUp[idx]
	if c.brought {
		if left := timeout - s.p.cfg.Now().Sub(c.heard); left > 0 {
			s.mu.Unlock()
			return false, left
		}
	}
	c.state, c.page = catchUpCut, ""
	s.mu.Unlock()
	s.relayDone(idx)
	return true, 0
}

// pageRefused acts on relay idx's CLOSED for page, if it is the one its
// catch-up awaits (awaited). A refusal for a while (not permanent: a cap
// on open subscriptions, a rate limit) has the page asked again, under a
// new id (see retryPage), while the catch-up has pages left: again is
// then the refusals of this catch-up so far, for the backoff. Otherwise
// the catch-up is cut: the relay's point stays where it was.
func (s *Subscription) pageRefused(idx int, page string, permanent bool) (awaited bool, again int) {
	s.mu.Lock()
	c := &s.catchUp[idx]
	awaited = c.state == catchUpPaging && c.page == page && !c.held
	switch {
	case !awaited:
	case !permanent && c.pages < s.p.cfg.MaxCatchUpPages:
		c.refused++
		c.held = true
		again = c.refused
	default:
		c.state, c.page = catchUpCut, ""
	}
	s.mu.Unlock()
	if awaited && again == 0 {
		s.relayDone(idx)
	}
	return awaited, again
}

// retryPage returns the page to ask relay idx for again in place of
// refused, if its catch-up still awaits that one: the same until, under
// a new id; it counts as a page.
func (s *Subscription) retryPage(idx int, refused string) pageAsk {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.catchUp[idx]
	if c.state != catchUpPaging || c.page != refused || !c.held || c.pages >= s.p.cfg.MaxCatchUpPages {
		return pageAsk{}
	}
	c.pages++
	s.pageSerial++
	c.page, c.held, c.brought, c.n = s.wireID+pageSep+strconv.FormatUint(s.pageSerial, 36), false, false, 0
	next := pageAsk{id: c.page, f: c.base.Clone()}
	until := c.until
	next.f.Until = &until
	return next
}

// openPage returns the wire id of the page relay idx's catch-up awaits,
// "" if none.
func (s *Subscription) openPage(idx int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.catchUp[idx].state != catchUpPaging || s.catchUp[idx].held {
		return ""
	}
	return s.catchUp[idx].page
}
