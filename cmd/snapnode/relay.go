package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/relay/embedded"
)

// relay runs the embedded Nostr relay alone until SIGINT or SIGTERM.
func (c *cli) relay(args []string) int {
	fs := c.flagSet("relay")
	listen := fs.String("listen", "127.0.0.1:7447", "`address` to listen on (host:port)")
	db := fs.String("db", "./snapnode-relay.db", "SQLite database `file` (\":memory:\" keeps events in memory)")
	maxEvents := fs.Int("store-max-events", 0, "keep at most `N` stored events, deleting the oldest past it (0: 1,000,000)")
	maxBytes := fs.Int64("store-max-bytes", 0, "keep at most `BYTES` of stored events, deleting the oldest past it (0: 1 GiB)")
	rate := fs.Float64("event-rate", 0, "take at most `N` events a second from each client address, its connections together (0: no limit; loopback not limited)")
	burst := fs.Int("event-burst", 0, "let each client address burst to `N` events above --event-rate (0: one second's worth)")
	share := fs.Float64("store-peer-share", 0, "let the stored events of each client address take at most the part `P` (0 to 1) of the store bounds, deleting its own oldest past it (0: no share; loopback has none)")
	var allowed []string
	fs.Func("allowed-origin", "let web pages of `ORIGIN` (scheme://host[:port], or * for every one) use the relay (repeatable); on a loopback address it takes clients without Origin and pages of loopback origins only, elsewhere, without this flag, every origin", func(v string) error {
		allowed = append(allowed, v)
		return nil
	})
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	const prog = "snapnode relay"
	// Checked here, so that the message names the flag and its rule (the
	// relay's own check names its Config's fields).
	switch {
	case *maxEvents < 0:
		return c.usageError(fs, fmt.Sprintf("--store-max-events %d: want 0 (1,000,000) or more events", *maxEvents))
	case *maxBytes < 0:
		return c.usageError(fs, fmt.Sprintf("--store-max-bytes %d: want 0 (1 GiB) or more bytes", *maxBytes))
	case !(*share >= 0 && *share <= 1): // NaN too
		return c.usageError(fs, fmt.Sprintf("--store-peer-share %g: want a part between 0 and 1", *share))
	case !(*rate >= 0) || math.IsInf(*rate, 0):
		return c.usageError(fs, fmt.Sprintf("--event-rate %g: want a finite rate of 0 (no limit) or more events a second", *rate))
	case *burst < 0:
		return c.usageError(fs, fmt.Sprintf("--event-burst %d: want 0 (one second's worth) or more events", *burst))
	}
	if _, err := origins.Parse(allowed); err != nil {
		return c.usageError(fs, fmt.Sprintf("--allowed-origin: %v", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.runRelay(ctx, prog, *listen, embedded.Config{DBPath: *db, StoreMaxEvents: *maxEvents, StoreMaxBytes: *maxBytes,
		StorePeerShare: *share, EventsPerSecond: *rate, EventBurst: *burst, AllowedOrigins: allowed})
}

// runRelay serves the relay of cfg on listen until ctx is cancelled.
func (c *cli) runRelay(ctx context.Context, prog, listen string, cfg embedded.Config) int {
	cfg.Logger = slog.New(slog.NewTextHandler(c.stderr, nil))
	r, err := embedded.New(cfg)
	if err != nil {
		return c.ioError(prog, err)
	}
	defer r.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return c.ioError(prog, err)
	}
	fmt.Fprintf(c.stdout, "snapnode relay listening url=%s\n", embedded.WebSocketURL(ln.Addr()))
	if err := r.Serve(ctx, ln); err != nil {
		return c.fail(prog, err)
	}
	if err := r.Close(); err != nil {
		return c.fail(prog, err)
	}
	return exitOK
}
