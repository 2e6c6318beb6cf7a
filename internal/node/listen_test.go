package node_test

import (
	"net"
	"net/http"
	"path/filepath"
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

// An address that cannot be listened on (taken by another program, say)
// stops the node with an error naming the setting and its flag, beside the
// system's reason: the README's first command, on a machine where 7447 is
// taken, must say what to change.
func TestListenErrorsNameTheSetting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, tt := range []struct {
		setting, flag string
		set           func(*config.Config)
	}{
		{"relay_listen", "--relay-listen", func(c *config.Config) { c.RelayListen = addr }},
		{"http_listen", "--http-listen", func(c *config.Config) { c.HTTPListen = addr }},
		{"metrics_listen", "--metrics-listen", func(c *config.Config) { c.MetricsListen = addr }},
	} {
		t.Run(tt.setting, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), "127.0.0.1:0", ""
			tt.set(&cfg)
			startRefused(t, cfg, "with "+tt.setting+" on a taken address", tt.setting, tt.flag, addr, "address already in use")
		})
	}
}
