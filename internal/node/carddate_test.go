package node

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// The node dates its card after the newest of its cards the relays hold
// (relays keep only the newest), and says when that one is dated further
// ahead than max_drift: discovery ignores a card dated so far ahead, and
// so the one dated after it, until about then, which the operator is
// told (a clock that ran ahead published it).
func TestCardDateAfterTheRelaysCards(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const drift = time.Minute
	for _, c := range []struct {
		name  string
		prev  []time.Time
		at    time.Time
		ahead bool
	}{
		{"none", nil, now, false},
		{"older", []time.Time{now.Add(-time.Hour)}, now, false},
		{"same second", []time.Time{now}, now.Add(time.Second), false},
		{"within the window", []time.Time{now.Add(30 * time.Second)}, now.Add(31 * time.Second), false},
		{"ahead", []time.Time{now.Add(-time.Hour), now.Add(10 * time.Minute)}, now.Add(10*time.Minute + time.Second), true},
	} {
		var prev []*nostr.Event
		for _, p := range c.prev {
			prev = append(prev, &nostr.Event{CreatedAt: nostr.Timestamp(p.Unix())})
		}
		at, ahead := cardDate(now, prev, drift)
		if !at.Equal(c.at) || ahead != c.ahead {
			t.Errorf("%s: dated %v (ahead %v), want %v (%v)", c.name, at, ahead, c.at, c.ahead)
		}
	}
}
