package relay

import "testing"

func TestURLKey(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"wss://relay.example", "wss://relay.example/"},
		{"wss://relay.example", "WSS://Relay.Example"},
		{"wss://relay.example", "wss://relay.example:443"},
		{"ws://relay.example", "ws://relay.example:80/"},
		{"wss://relay.example/nostr", "wss://relay.example/nostr/"},
	} {
		if urlKey(c.a) != urlKey(c.b) {
			t.Errorf("%s and %s: keys %q and %q, want one", c.a, c.b, urlKey(c.a), urlKey(c.b))
		}
	}
	for _, c := range []struct{ a, b string }{
		{"wss://relay.example", "ws://relay.example"},
		{"wss://relay.example", "wss://relay.example:444"},
		{"wss://relay.example/a", "wss://relay.example/b"},
		{"wss://relay.example/Nostr", "wss://relay.example/nostr"},
		{"wss://relay.example", "wss://relay.example?x=1"},
	} {
		if urlKey(c.a) == urlKey(c.b) {
			t.Errorf("%s and %s: one key %q, want two", c.a, c.b, urlKey(c.a))
		}
	}
}
