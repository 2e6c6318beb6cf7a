//go:build !race

package tasks_test

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// A message/send answered through the node's snap.Server, with Nostr's
// bound on an answer's size, takes at most 128 allocations: the answer is
// written once, in canonical form, and measured without being built
// again (it took 139, encoding/json by reflection, canonicalization, and
// the whole message built to be measured; not run under the race
// detector, which empties pools at random).
func TestSendThroughServerAllocations(t *testing.T) {
	server, raw := serverAndSend(t, nil)
	ctx := context.Background()
	in := snap.Inbound{Raw: raw, Transport: "nostr", MaxSize: 65_535}
	if n := testing.AllocsPerRun(200, func() {
		resp := server.Respond(ctx, in)
		if resp == nil || len(resp.Payload) < 9 || string(resp.Payload[:9]) == `{"error":` {
			t.Fatalf("answered %s", resp.Payload)
		}
	}); n > 128 {
		t.Errorf("answering the message/send made %.0f allocations, want at most 128", n)
	}
}
