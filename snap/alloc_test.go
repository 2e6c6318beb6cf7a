//go:build !race

package snap_test

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// Validating a 1 KiB message/send and signing one stay within a bounded
// number of allocations: the JSON decoders of the syntax stage, the
// canonical form and the envelope's member count are reused, not made
// afresh with their lists of names (77 and 28 when they were; not run
// under the race detector, which empties pools at random).
func TestValidateAndSignAllocations(t *testing.T) {
	m := message1KiB(t)
	payload := m.Payload // as a handler hands it over: not yet canonical
	if err := m.Sign(keyA); err != nil {
		t.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	v := snap.NewValidator(snap.Config{Now: at(t0), Self: keyB.Address(identity.Mainnet)})
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if _, err := v.Validate(ctx, raw); err != nil {
			t.Fatal(err)
		}
	}); n > 35 {
		t.Errorf("validating the message made %.0f allocations, want at most 35", n)
	}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() {
		m.Payload = payload
		if err := m.Sign(keyA); err != nil {
			t.Fatal(err)
		}
		buf, _ = m.AppendJSON(buf[:0])
	}); n > 12 {
		t.Errorf("signing the message made %.0f allocations, want at most 12", n)
	}
}
