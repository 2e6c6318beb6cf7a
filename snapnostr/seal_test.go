package snapnostr

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/identity"
)

// TestConversationKeyVectors checks the conversation key against NIP-44's
// published vectors, with the ECDH of whichever secp256k1 implementation
// the build selects, and against go-nostr's own derivation.
func TestConversationKeyVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/nip44-conversation-keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Sec1            string `json:"sec1"`
			Pub2            string `json:"pub2"`
			ConversationKey string `json:"conversation_key"`
			Note            string `json:"note"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for i, v := range file.Vectors {
		t.Run(v.Pub2[:8]+" "+v.Note, func(t *testing.T) {
			k, err := identity.FromHex(v.Sec1)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := conversationKey(k, v.Pub2)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(ck[:]); got != v.ConversationKey {
				t.Errorf("vector %d: conversation key %s, want %s", i, got, v.ConversationKey)
			}
			ref, err := nip44.GenerateConversationKey(v.Pub2, v.Sec1)
			if err != nil {
				t.Fatal(err)
			}
			if ck != ref {
				t.Errorf("vector %d: conversation key %x, go-nostr %x", i, ck, ref)
			}
		})
	}
}

// TestConversationKeyBadPeer names what is wrong with a peer key that no
// conversation can have.
func TestConversationKeyBadPeer(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, peer, want string }{
		{"short", "abcd", "4 characters"},
		{"not hex", strings.Repeat("zz", 32), "invalid byte"},
		{"not on the curve", strings.Repeat("0", 63) + "5", "not the x coordinate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conversationKey(k, tc.peer)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
			if tc.name == "not on the curve" && !errors.Is(err, identity.ErrInvalidKey) {
				t.Errorf("err = %v, want identity.ErrInvalidKey", err)
			}
		})
	}
}
