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
	r := newRequester(key, nil, 0, nil)
	now := time.Now()
	rec := snap.ReplayRecord{FirstSeen: now, Expires: now.Add(snap.MinReplayRetention)}
	for i := range answerReplayCapacity + 1 {
		if _, fresh, err := r.replay.Remember(context.Background(), "agent", strconv.Itoa(i), rec); err != nil || !fresh {
			t.Fatalf("answer %d: fresh=%v err=%v", i, fresh, err)
		}
	}
}

// The answers to a requester's own requests are checked by one Validator
// per address, kept across exchanges with its caches; a request signed
// beforehand by another key gets a Validator of its own, never kept.
func TestRequesterKeepsItsValidators(t *testing.T) {
	key, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := newRequester(key, nil, 0, nil)
	for _, n := range []identity.Network{identity.Mainnet, identity.Testnet} {
		if a, b := r.validator(key.Address(n)), r.validator(key.Address(n)); a != b {
			t.Errorf("%v: a new Validator for each exchange", n)
		}
	}
	foreign := other.Address(identity.Mainnet)
	if r.validator(foreign) == r.validator(foreign) {
		t.Error("a foreign sender's Validator was kept")
	}
	if n := len(r.checks.byTo); n != 2 {
		t.Errorf("%d Validators kept, want 2", n)
	}
}
