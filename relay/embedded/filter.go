package embedded

import (
	"fmt"
	"slices"

	"github.com/nbd-wtf/go-nostr"
)

// filter is one parsed NIP-01 filter. A nil list means the field was
// absent (anything matches); a present but empty list matches nothing.
// Lists are deduplicated and sorted, so they can go into SQL as they are.
type filter struct {
	ids     []string
	authors []string
	kinds   []int
	tags    []tagFilter // sorted by name; one entry per "#name" key

	since, until       int64
	hasSince, hasUntil bool

	limit    int
	hasLimit bool

	idSet, authorSet map[string]struct{}
	kindSet          map[int]struct{}
}

// tagFilter is a "#name": [values…] condition: the event must have a tag
// whose first element is name and whose second is one of values.
type tagFilter struct {
	name   string
	values []string
	set    map[string]struct{}
}

// finish deduplicates and sorts the lists and builds the lookup sets.
func (f *filter) finish() {
	f.ids, f.idSet = dedupeStrings(f.ids)
	f.authors, f.authorSet = dedupeStrings(f.authors)
	if f.kinds != nil {
		slices.Sort(f.kinds)
		f.kinds = slices.Compact(f.kinds)
		f.kindSet = make(map[int]struct{}, len(f.kinds))
		for _, k := range f.kinds {
			f.kindSet[k] = struct{}{}
		}
	}
	for i := range f.tags {
		f.tags[i].values, f.tags[i].set = dedupeStrings(f.tags[i].values)
	}
	slices.SortFunc(f.tags, func(a, b tagFilter) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
}

// complete finishes a filter just read and checks it against lim.
func (f *filter) complete(lim *limits) (*filter, error) {
	f.finish()
	if n := f.valueCount(); n > lim.maxFilterValues {
		return nil, fmt.Errorf("too many values in a filter (%d > %d)", n, lim.maxFilterValues)
	}
	if len(f.tags) > maxTagConditions {
		return nil, fmt.Errorf("too many tag conditions in a filter (%d > %d)", len(f.tags), maxTagConditions)
	}
	return f, nil
}

// maxTagConditions bounds the "#name" conditions of one filter. Each is
// a lookup of its own in the query (and SQLite refuses an expression
// nested past 1,000 levels, which a thousand of them reach); real
// clients use one or two.
const maxTagConditions = 100

func dedupeStrings(s []string) ([]string, map[string]struct{}) {
	if s == nil {
		return nil, nil
	}
	slices.Sort(s)
	s = slices.Compact(s)
	set := make(map[string]struct{}, len(s))
	for _, v := range s {
		set[v] = struct{}{}
	}
	return s, set
}

// matchesNothing reports whether a present but empty list makes the filter
// impossible to satisfy, or since is after until.
func (f *filter) matchesNothing() bool {
	if (f.ids != nil && len(f.ids) == 0) ||
		(f.authors != nil && len(f.authors) == 0) ||
		(f.kinds != nil && len(f.kinds) == 0) {
		return true
	}
	for _, t := range f.tags {
		if len(t.values) == 0 {
			return true
		}
	}
	return f.hasSince && f.hasUntil && f.since > f.until
}

// eventTags are the tags of an event that tag conditions look at: its
// distinct (name, first value) pairs, in order, and their set.
type eventTags struct {
	pairs [][2]string
	set   map[[2]string]struct{}
}

// tagsOf returns the eventTags of ev.
func tagsOf(ev *nostr.Event) eventTags {
	et := eventTags{pairs: make([][2]string, 0, len(ev.Tags)), set: make(map[[2]string]struct{}, len(ev.Tags))}
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		p := [2]string{t[0], t[1]}
		if _, dup := et.set[p]; dup {
			continue
		}
		et.set[p] = struct{}{}
		et.pairs = append(et.pairs, p)
	}
	return et
}

// matches reports whether ev, whose tags are tags (see tagsOf), satisfies
// every condition of f (limit aside). A tag condition costs at most as
// many lookups as it has values or the event distinct tags, whichever is
// fewer, not a pass over every tag of the event.
func (f *filter) matches(ev *nostr.Event, tags *eventTags) bool {
	if f.ids != nil {
		if _, ok := f.idSet[ev.ID]; !ok {
			return false
		}
	}
	if f.authors != nil {
		if _, ok := f.authorSet[ev.PubKey]; !ok {
			return false
		}
	}
	if f.kinds != nil {
		if _, ok := f.kindSet[ev.Kind]; !ok {
			return false
		}
	}
	created := int64(ev.CreatedAt)
	if f.hasSince && created < f.since {
		return false
	}
	if f.hasUntil && created > f.until {
		return false
	}
	for i := range f.tags {
		if !f.tags[i].matches(tags) {
			return false
		}
	}
	return true
}

func (t *tagFilter) matches(tags *eventTags) bool {
	if len(t.values) < len(tags.pairs) {
		for _, v := range t.values {
			if _, ok := tags.set[[2]string{t.name, v}]; ok {
				return true
			}
		}
		return false
	}
	for _, p := range tags.pairs {
		if p[0] != t.name {
			continue
		}
		if _, ok := t.set[p[1]]; ok {
			return true
		}
	}
	return false
}

// valueCount is the number of values in f's lists, the cost bound of a
// filter.
func (f *filter) valueCount() int {
	n := len(f.ids) + len(f.authors) + len(f.kinds)
	for _, t := range f.tags {
		n += len(t.values)
	}
	return n
}
