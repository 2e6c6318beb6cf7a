package relay_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
)

// An event is signed with the node's key before it is published; an event
// that arrives is verified once, and one altered on its way is refused.
func ExampleVerifier() {
	k, err := identity.FromHex(strings.Repeat("0a", 32))
	if err != nil {
		panic(err)
	}
	ev := nostr.Event{Kind: 1, CreatedAt: 1738627200, Content: "hello"}
	if err := relay.SignEvent(k, &ev); err != nil {
		panic(err)
	}
	v := relay.NewVerifier()
	fmt.Println("signed:", v.Verify(&ev))
	ev.Content = "hello, altered"
	fmt.Println("altered refused:", errors.Is(v.Verify(&ev), relay.ErrInvalidEvent))
	// Output:
	// signed: <nil>
	// altered refused: true
}
