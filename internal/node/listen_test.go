package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// A node listening on every interface (as in a container, where the ports
// are published) starts, publishes a valid card whose relay is reached on
// loopback, answers over it, and serves HTTP at a URL one can dial.
func TestNodeListensOnEveryInterface(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.RelayListen, c.HTTPListen = "0.0.0.0:0", "0.0.0.0:0"
	})
	relays := n.Card().NostrRelays
	if len(relays) != 1 || !strings.HasPrefix(relays[0], "ws://127.0.0.1:") || relays[0] != n.RelayURLs()[0] {
		t.Fatalf("card relays %v, node relays %v: want the loopback URL of the relay", relays, n.RelayURLs())
	}
	if p := newRequester(t, n.RelayURLs()).call(t, n, "message/send", text("hello"), false); taskOf(t, p).ID == "" {
		t.Fatalf("message/send over the relay: %v", p)
	}
	if !strings.HasPrefix(n.HTTPURL(), "http://127.0.0.1:") {
		t.Fatalf("HTTPURL %q: want loopback", n.HTTPURL())
	}
	resp, err := http.Get(n.HTTPURL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", resp.Status)
	}
}
