package snap_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/snap"
)

// A message carried by a transport whose signer is the sender's internal
// key (ValidateSigned, as over Nostr) is checked through that key's
// table in the Tables of Config.Tables, the relay's: after
// secp.PromoteAfter messages the internal key P holds a table there, not
// the output key Q named by from, so one agent holds one table for its
// events and its messages. A forged signature is still refused, and so
// is a signer whose output key is not from's.
func TestValidateSignedUsesSignerTable(t *testing.T) {
	ctx := context.Background()
	tables := secp.NewTables[[32]byte](4)
	v := snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(t0, 0) }, Tables: tables})
	for i := range secp.PromoteAfter {
		if _, err := v.ValidateSigned(ctx, signed(t, fmt.Sprintf("s%d", i), t0), keyA.InternalKey()); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		forged := signed(t, fmt.Sprintf("f%d", i), t0)
		// A hex digit of sig, the last field, changed.
		if j := len(forged) - 3; forged[j] == '0' {
			forged[j] = '1'
		} else {
			forged[j] = '0'
		}
		if _, err := v.ValidateSigned(ctx, forged, keyA.InternalKey()); code(err) != snap.CodeSignatureInvalid {
			t.Fatalf("forged message %d: %v, want %d", i, err, snap.CodeSignatureInvalid)
		}
	}
	if _, ok := tables.Get(keyA.InternalKey()); !ok {
		t.Fatalf("the signer holds no table after %d messages", secp.PromoteAfter)
	}
	if _, ok := tables.Get(keyA.OutputKey()); ok || tables.Len() != 1 {
		t.Fatalf("the output key holds a table too (%v) or %d keys are held, want 1", ok, tables.Len())
	}
	// Through the table now.
	if _, err := v.ValidateSigned(ctx, signed(t, "after", t0), keyA.InternalKey()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ValidateSigned(ctx, signed(t, "other", t0), keyB.InternalKey()); code(err) != snap.CodeIdentityMismatch {
		t.Fatalf("a signer that is not from's key: %v, want %d", err, snap.CodeIdentityMismatch)
	}
}
