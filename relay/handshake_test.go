package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/internal/wshandshake"
	"github.com/snapnode/snapnode/relay"
)

// A relay that answers the upgrade with headers without end is refused
// once the handshake passes its bound: before, the pool read them all
// until its handshake time-out (10 s), holding every byte, and dialed it
// again at each reconnection.
func TestDialRefusesAnEndlessHandshake(t *testing.T) {
	url, served := testutil.EndlessUpgrade(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := relay.DialWebsocket(ctx, url)
	if err == nil {
		c.Close()
		t.Fatal("an endless handshake was taken")
	}
	if !errors.Is(err, wshandshake.ErrTooLarge) {
		t.Fatalf("dial: %v; want the handshake refused at its bound", err)
	}
	if r := <-served; r.Err == nil {
		t.Fatalf("the pool read all %d bytes of headers the relay sent", r.Bytes)
	}
}
