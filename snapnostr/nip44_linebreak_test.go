package snapnostr

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/relay"
)

// A NIP-44 payload holding a line break is refused, not decoded: Go's
// base64 skips CR and LF, and go-nostr's Decrypt then indexed the empty
// result of a payload of line breaks alone, a panic that took the whole
// node down from any Nostr key's event tagged to it. The request is
// refused, as any payload that does not open is.
func TestNIP44LineBreaksRefused(t *testing.T) {
	r := newHandleRig(t, InboxConfig{})
	genuine, err := r.in.sealer.seal(r.peer.NostrPublicKey(), []byte(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	peerSealer := newSealer(r.peer, 1)
	for name, content := range map[string]string{
		"line breaks only":                  strings.Repeat("\n", 132),
		"CRLF only":                         strings.Repeat("\r\n", 66),
		"a genuine payload broken in lines": genuine[:64] + "\r\n" + genuine[64:],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := peerSealer.open(r.agent.NostrPublicKey(), content); err == nil || !strings.Contains(err.Error(), "line break") {
				t.Fatalf("open: %v, want a refusal naming the line break", err)
			}
			before := r.published.published.Load()
			r.in.handle(r.run, r.request(relay.KindEphemeral, r.now(), content), false)
			if n := r.published.published.Load() - before; n != 1 {
				t.Fatalf("%d answers published, want the refusal", n)
			}
		})
	}
}
