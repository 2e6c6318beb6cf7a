package client

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// A busy requester gets more answers within the replay window than its
// store holds: the store forgets the oldest rather than refuse the next
// genuine answer (a refusal reads as an invalid response to the caller).
func TestRequesterRemembersPastItsCapacity(t *testing.T) {
	key, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := newRequester(key, nil, 0)
	now := time.Now()
	rec := snap.ReplayRecord{FirstSeen: now, Expires: now.Add(snap.MinReplayRetention)}
	for i := range answerReplayCapacity + 1 {
		if _, fresh, err := r.replay.Remember(context.Background(), "agent", strconv.Itoa(i), rec); err != nil || !fresh {
			t.Fatalf("answer %d: fresh=%v err=%v", i, fresh, err)
		}
	}
}
