package embedded

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/lowerhex"
)

// class is the storage class of an event kind (NIP-01).
type class int

const (
	classRegular     class = iota // stored as is
	classReplaceable              // latest per (pubkey, kind)
	classEphemeral                // forwarded, never stored
	classAddressable              // latest per (pubkey, kind, d tag)
)

// kindClass classifies kind: 0, 3 and 10000–19999 are replaceable,
// 20000–29999 ephemeral, 30000–39999 addressable, everything else regular.
func kindClass(kind int) class {
	switch {
	case kind == 0 || kind == 3 || (kind >= 10000 && kind < 20000):
		return classReplaceable
	case kind >= 20000 && kind < 30000:
		return classEphemeral
	case kind >= 30000 && kind < 40000:
		return classAddressable
	default:
		return classRegular
	}
}

// maxKind is the largest kind NIP-01 allows.
const maxKind = 65535

// errInvalidEvent marks an event that breaks NIP-01 (an "invalid:" answer).
var errInvalidEvent = errors.New("invalid event")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidEvent}, args...)...)
}

// checkShape checks the fields of ev that do not need cryptography: hex
// lengths, the kind range, and the configured size limits.
func checkShape(ev *nostr.Event, lim *limits) error {
	switch {
	case !lowerhex.Valid(ev.ID, 64):
		return invalidf("id must be 64 lowercase hex characters")
	case !lowerhex.Valid(ev.PubKey, 64):
		return invalidf("pubkey must be 64 lowercase hex characters")
	case !lowerhex.Valid(ev.Sig, 128):
		return invalidf("sig must be 128 lowercase hex characters")
	case ev.Kind < 0 || ev.Kind > maxKind:
		return invalidf("kind must be in 0…%d", maxKind)
	case ev.CreatedAt < 0:
		return invalidf("created_at must not be negative")
	case len(ev.Tags) > lim.maxEventTags:
		return invalidf("too many tags (%d > %d)", len(ev.Tags), lim.maxEventTags)
	case len(ev.Content) > lim.maxContentLength:
		return invalidf("content too long (%d > %d bytes)", len(ev.Content), lim.maxContentLength)
	}
	return nil
}

// expiration returns the NIP-40 expiration of ev (the first "expiration"
// tag) and whether it has one. A tag whose value is not a non-negative
// decimal integer is an error.
func expiration(ev *nostr.Event) (int64, bool, error) {
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "expiration" {
			continue
		}
		n, err := strconv.ParseInt(t[1], 10, 64)
		if err != nil || n < 0 {
			return 0, false, invalidf("expiration tag must be a unix timestamp")
		}
		return n, true, nil
	}
	return 0, false, nil
}

// dTag returns the value of the first "d" tag, or "" (NIP-01 addressable
// events).
func dTag(ev *nostr.Event) string {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "d" {
			return t[1]
		}
	}
	return ""
}

// newer reports whether event a (createdA, idA) wins over b under NIP-01
// replacement: the later created_at, and on a tie the lowest id.
func newer(createdA int64, idA string, createdB int64, idB string) bool {
	if createdA != createdB {
		return createdA > createdB
	}
	return idA < idB
}
