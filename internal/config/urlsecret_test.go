package config_test

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// A URL of the settings with a user or password is refused, naming the
// setting and the rule, and the refusal never shows the password: the
// node's WebSocket client refuses such a relay URL (it would be retried,
// and logged, without end), the card would publish it to the world, and
// the public URL is what the card advertises.
func TestURLsWithAPasswordAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"relays", func(c *config.Config) {
			c.Relays = []string{"wss://relay.example.org", "wss://u:SECRETPW@relay.example.com"}
		},
			`config: relays: "wss://u:xxxxx@relay.example.com": want a ws:// or wss:// URL with a host and no user or password`},
		{"relay that does not parse", func(c *config.Config) { c.Relays = []string{"wss://u:SECRETPW@[bad"} },
			`config: relays: (a URL that does not parse): want a ws:// or wss:// URL with a host and no user or password`},
		{"relay of another scheme", func(c *config.Config) { c.Relays = []string{"https://relay.example.com"} },
			`config: relays: "https://relay.example.com": want a ws:// or wss:// URL`},
		{"card relays", func(c *config.Config) { c.Card.NostrRelays = []string{"wss://u:SECRETPW@relay.example.com"} },
			`config: card.nostr_relays: "wss://u:xxxxx@relay.example.com": want a ws:// or wss:// URL with a host and no user or password`},
		{"public URL", func(c *config.Config) { c.HTTPPublicURL = "https://u:SECRETPW@node.example.com" },
			`config: http_public_url "https://u:xxxxx@node.example.com": want an http:// or https:// URL with a host and no user, password or query`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.set(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("valid")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRETPW") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// A card relay given by --card-relay is named by the flag, not by the
// file's [card] nostr_relays it replaces.
func TestCardRelayNamedByItsFlag(t *testing.T) {
	file := writeFile(t, "snapnode.toml", "[card]\nnostr_relays = [\"wss://relay.example.com\"]\n", 0o600)
	_, err := load(t, []string{"--config", file, "--card-relay", "wss://u:pw@relay.example.org"}, nil)
	if err == nil || !strings.Contains(err.Error(), "config: --card-relay: card.nostr_relays: ") || strings.Contains(err.Error(), file) {
		t.Errorf("error %v; want it to name --card-relay, not the file", err)
	}
}
