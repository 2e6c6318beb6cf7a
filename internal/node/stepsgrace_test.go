package node_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// Once the node's context ends, the steps after requests' commits (the
// agent's take, a run of proposals, which outlive their requests) have
// the HTTP transport's grace to end and are then stopped, before Wait
// stops the transports: a WebSocket connection's requests are waited for
// by the transport's stop, and a request's run, no longer ended by its
// connection, would otherwise hold the node's stop until the run's own
// limit. Before, the steps were stopped only after the transports had
// stopped.
func TestStepsStoppedAfterTheGrace(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), node.WithStepsGrace(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	life := n.StepsLifetime()
	if life.Err() != nil {
		t.Fatalf("the steps' lifetime ended while the node runs: %v", life.Err())
	}
	cancel()
	select {
	case <-life.Done():
	case <-time.After(30 * time.Second):
		t.Error("the steps' lifetime did not end after the grace, before Wait")
	}
	if err := n.Wait(); err != nil {
		t.Fatal(err)
	}
}
