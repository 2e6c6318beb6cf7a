package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/readfile"
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
	file := fs.String("allowed-origins-file", "", "take the origins of `FILE` too, one a line (blank lines and # comments left out); SIGHUP reads it again and puts its list in force without a restart")
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
	// The list in force: the flags' origins and the file's.
	list := allowed
	var load func() ([]string, error)
	if *file != "" {
		load = func() ([]string, error) {
			more, err := readOrigins(*file)
			if err != nil {
				return nil, err
			}
			return append(slices.Clip(allowed), more...), nil
		}
		var err error
		if list, err = load(); err != nil {
			return c.ioError(prog, err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP reads the file again; caught from here on, so that it never
	// ends the relay, as its default would.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return c.runRelay(ctx, prog, *listen, embedded.Config{DBPath: *db, StoreMaxEvents: *maxEvents, StoreMaxBytes: *maxBytes,
		StorePeerShare: *share, EventsPerSecond: *rate, EventBurst: *burst, AllowedOrigins: list}, hup, load)
}

// maxOriginsFile bounds the file of --allowed-origins-file.
const maxOriginsFile = 1 << 20

// readOrigins reads the origins of a file of --allowed-origins-file: one a
// line, blank lines and lines starting with # left out. They are checked
// where they are put in force.
func readOrigins(path string) ([]string, error) {
	b, err := readfile.Regular(path, maxOriginsFile)
	if err != nil {
		return nil, fmt.Errorf("--allowed-origins-file: %w", err)
	}
	var list []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			list = append(list, line)
		}
	}
	if _, err := origins.Parse(list); err != nil {
		return nil, fmt.Errorf("--allowed-origins-file %s: %w", path, err)
	}
	return list, nil
}

// relayUnbounded names the flags that a relay of cfg listening on addr
// lacks to bound what one client address publishes: --event-rate and
// --store-peer-share, neither of which applies to loopback clients, so
// none on a loopback address.
func relayUnbounded(addr net.Addr, cfg embedded.Config) []string {
	if t, ok := addr.(*net.TCPAddr); !ok || t.IP.IsLoopback() {
		return nil
	}
	var missing []string
	if cfg.EventsPerSecond == 0 {
		missing = append(missing, "--event-rate")
	}
	if cfg.StorePeerShare == 0 {
		missing = append(missing, "--store-peer-share")
	}
	return missing
}

// runRelay serves the relay of cfg on listen until ctx is cancelled. At
// each signal on hup it puts in force the origins load returns (a list
// that does not load leaves the one in force); with no load, it says
// that nothing is read again.
func (c *cli) runRelay(ctx context.Context, prog, listen string, cfg embedded.Config, hup <-chan os.Signal, load func() ([]string, error)) int {
	logger := slog.New(slog.NewTextHandler(c.stderr, nil))
	cfg.Logger = logger
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
	if missing := relayUnbounded(ln.Addr(), cfg); len(missing) > 0 {
		logger.Warn("relay listening beyond loopback with no bound on what one client address publishes: one address may flood it and push every other stored event out; give these flags",
			"missing", strings.Join(missing, " "), "addr", ln.Addr().String())
	}
	rctx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for {
			select {
			case <-rctx.Done():
				return
			case <-hup:
			}
			if load == nil {
				logger.Info("SIGHUP: nothing to read again: the relay's settings are its flags (restart it to change them; the origins of --allowed-origins-file are read again)")
				continue
			}
			list, err := load()
			if err == nil {
				var added, removed []string
				if added, removed, err = r.SetAllowedOrigins(list); err == nil {
					if len(added) > 0 || len(removed) > 0 {
						logger.Info("allowed origins changed", "added", added, "removed", removed)
					} else {
						logger.Info("allowed origins read again: no change")
					}
					continue
				}
			}
			logger.Error("SIGHUP: allowed origins not changed; the list in force stays", "err", err)
		}
	}()
	err = r.Serve(ctx, ln)
	stopReload()
	<-reloaded
	if err != nil {
		return c.fail(prog, err)
	}
	if err := r.Close(); err != nil {
		return c.fail(prog, err)
	}
	return exitOK
}
