package node

import (
	"cmp"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/relay"
)

// After a reconnect the pool asks each relay again from the last
// created_at it brought minus the resubscribe skew. A peer's clock may be
// behind the others' by up to the timestamp window (max_drift), and its
// request, published to the relay while the node's connection was down,
// is accepted when it arrives: the skew must reach back that far, or the
// request is never asked for.
func TestPoolResubscribeSkewCoversTheTimestampWindow(t *testing.T) {
	for _, drift := range []time.Duration{0, time.Minute, 5 * time.Minute} {
		cfg := config.Default()
		cfg.MaxDrift = config.Duration{Duration: drift}
		w := &wiring{n: &Node{cfg: cfg, urls: []string{"wss://relay.example"}, logger: slog.New(slog.DiscardHandler)}}
		window := drift
		if window == 0 {
			window = time.Minute // the validator's default
		}
		if got := cmp.Or(w.poolConfig().ResubscribeSkew, relay.DefaultResubscribeSkew); got < window {
			t.Errorf("max_drift %s: the pool resubscribes %s back, less than the window", drift, got)
		}
	}
}
