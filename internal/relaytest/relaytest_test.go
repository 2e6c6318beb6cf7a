package relaytest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay/embedded"
)

// Serve's relay answers on its URL; a Cuttable dials it until it is cut,
// then fails with net.ErrClosed and has closed the connection it made,
// and dials it again once restored.
func TestServeAndCut(t *testing.T) {
	url := relaytest.Serve(t, embedded.Config{})
	c := &relaytest.Cuttable{URL: url}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial the served relay: %v", err)
	}
	c.Cut()
	if _, err := c.Dial(ctx, url); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial while cut: %v, want net.ErrClosed", err)
	}
	select {
	case _, open := <-conn.Messages():
		if open {
			t.Fatal("the connection made before the cut delivered a message")
		}
	case <-ctx.Done():
		t.Fatal("the connection made before the cut is still open")
	}
	c.Restore()
	again, err := c.Dial(ctx, url)
	if err != nil {
		t.Fatalf("dial once restored: %v", err)
	}
	again.Close()
}
