package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/relay"
)

// refusingRelays is a transport that takes no subscription: a request
// reaching it passed every check made before anything is sent.
type refusingRelays struct{}

var errNoRelay = errors.New("no relay here")

func (refusingRelays) Subscribe(context.Context, nostr.Filter) (*relay.Subscription, error) {
	return nil, errNoRelay
}

func (refusingRelays) Publish(context.Context, nostr.Event) (relay.PublishResult, error) {
	return relay.PublishResult{}, errNoRelay
}

// A target's Nostr key must own its address on every request, whichever
// keys the client checked and remembered before.
func TestNostrTargetMustOwnItsAddress(t *testing.T) {
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: refusingRelays{}, Verifier: relay.NewVerifier()})
	target := func(owner, addressOf string) client.Target {
		keys := map[string]string{"server": serverKey.NostrPublicKey(), "other": otherKey.NostrPublicKey()}
		addrs := map[string]string{"server": addr(serverKey), "other": addr(otherKey)}
		return client.Target{PubKey: keys[owner], Address: addrs[addressOf]}
	}
	for _, tc := range []struct {
		key, address string
		owns         bool
	}{
		{"server", "server", true},
		{"server", "other", false}, // the server's key, remembered, with another's address
		{"other", "server", false},
		{"other", "other", true},
		{"server", "other", false},
		{"server", "server", true},
	} {
		_, err := c.Request(context.Background(), target(tc.key, tc.address), client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"id":"x"}`)})
		switch {
		case tc.owns && !errors.Is(err, errNoRelay):
			t.Errorf("key of %s, address of %s: %v, want the request sent", tc.key, tc.address, err)
		case !tc.owns && (err == nil || !strings.Contains(err.Error(), "does not own")):
			t.Errorf("key of %s, address of %s: %v, want refused before sending", tc.key, tc.address, err)
		}
	}
}
