package node_test

import (
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/snap"
)

// rateLimited reports whether p is a 5002 answer of the given scope that
// says when to come back.
func rateLimited(p map[string]any, scope string) bool {
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	after, _ := d["retryAfter"].(float64)
	return errCode(p) == int(snap.CodeRateLimitExceeded) && d["scope"] == scope && after >= 1
}

// The per-identity limit holds over every transport: an identity that
// spent its burst over HTTP is refused over Nostr too, with 5002 and
// retryAfter, while another identity is still served.
func TestIdentityLimitAcrossTransports(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.IdentityRate, c.IdentityBurst = 0.001, 3
		c.NostrKeyRate = 0
	})
	aliceKey, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	alice := newHTTPClientWith(t, aliceKey)
	endpoint := n.HTTPURL() + "/snap"
	unknown := map[string]any{"taskId": "no-such-task"}
	for i := range 3 {
		if p := httpCall(t, alice.Send, endpoint, n, "tasks/get", unknown); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d within the burst: %v", i+1, p)
		}
	}
	if p := httpCall(t, alice.Send, endpoint, n, "tasks/get", unknown); !rateLimited(p, "identity") {
		t.Errorf("over the burst over HTTP: %v", p)
	}
	overNostr := newRequesterWith(t, n.RelayURLs(), aliceKey)
	if p := overNostr.call(t, n, "tasks/get", unknown, false); !rateLimited(p, "identity") {
		t.Errorf("the same identity over Nostr: %v", p)
	}
	bob := newRequester(t, n.RelayURLs())
	if p := bob.call(t, n, "tasks/get", unknown, false); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("another identity: %v", p)
	}
}

// The per-Nostr-key limit refuses a key's events past its burst before
// they are decrypted; the same identity over HTTP is not a Nostr key and
// is served.
func TestNostrKeyLimit(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.IdentityRate = 0
		c.NostrKeyRate, c.NostrKeyBurst = 0.001, 2
	})
	alice := newRequester(t, n.RelayURLs())
	unknown := map[string]any{"taskId": "no-such-task"}
	for i := range 2 {
		if p := alice.call(t, n, "tasks/get", unknown, false); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d within the burst: %v", i+1, p)
		}
	}
	if p := alice.call(t, n, "tasks/get", unknown, false); !rateLimited(p, "key") {
		t.Errorf("over the burst: %v", p)
	}
	overHTTP := newHTTPClientWith(t, alice.key)
	if p := httpCall(t, overHTTP.Send, n.HTTPURL()+"/snap", n, "tasks/get", unknown); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("the same identity over HTTP: %v", p)
	}
}
