package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/memlimit"
	"github.com/snapnode/snapnode/internal/node"
)

// runNode is `snapnode run`: the daemon.
func (c *cli) runNode(args []string) int {
	fs, flagged := c.nodeFlagSet("run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE` (for go tool pprof)")
	memProfile := fs.String("memprofile", "", "write a heap profile to `FILE` when the node is told to stop, before it stops (for go tool pprof)")
	_, code, done := c.parse(fs, args, 0)
	if done {
		return code
	}
	if *memProfile == "" && !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		// No heap profile asked for: the runtime's sampling of one
		// allocation per 512 KiB would keep, for nothing, a record per
		// allocating stack for the life of the node.
		runtime.MemProfileRate = 0
	}
	// SIGHUP reads the same sources again.
	sources := config.NewSources(flagged, fs, os.Getenv)
	cfg, overridden, err := sources.LoadOverridden()
	if err != nil {
		return c.configError(fs, err)
	}
	var level slog.LevelVar // SIGHUP may change it
	level.Set(cfg.Level())
	logger := cfg.Logger(c.stderr, &level)
	warnOverridden(logger, cfg.ConfigFile, overridden)
	if unknown := config.UnknownVariables(os.Environ()); len(unknown) > 0 {
		logger.Warn("SNAPNODE_* variables that no setting reads: ignored", "variables", unknown)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return c.ioError("snapnode run", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return c.ioError("snapnode run", err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP reads the settings again from the flags, the environment and
	// the file, and puts in force those that can change live; settings
	// that do not load leave those in force unchanged. It is caught from
	// here on, so that one sent while the node starts (systemctl reload)
	// does not end it, as SIGHUP's default would: it is handled once the
	// node is ready.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	defer memlimit.Hold(context.Background(), cfg.MemoryLimit)() // held through the shutdown too
	n, err := node.Start(ctx, cfg, logger, node.WithLogLevel(&level))
	if err != nil {
		fmt.Fprintf(c.stderr, "snapnode run: %v\n", err)
		return exitFail
	}
	relayURL := n.RelayURLs()[0]
	ready := fmt.Sprintf("snapnode ready address=%s nostr=%s relay=%s", n.Address(), n.NostrPublicKey(), relayURL)
	if u := n.HTTPURL(); u != "" {
		ready += " http=" + u + "/snap"
	}
	fmt.Fprintln(c.stdout, ready)
	fmt.Fprintf(c.stdout, "try: %s send --to %s --relay %s \"hello\"\n", selfCommand(), n.Address(), relayURL)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-hup:
			fresh, overridden, err := sources.LoadOverridden()
			if err != nil {
				logger.Error("SIGHUP: settings not reloaded; those in force stay", "err", err)
				break
			}
			warnOverridden(logger, fresh.ConfigFile, overridden)
			if _, err := n.Reload(ctx, fresh); errors.Is(err, node.ErrNotReloaded) {
				logger.Error("SIGHUP: settings not reloaded; those in force stay", "err", err)
			} else if err != nil {
				logger.Error("SIGHUP", "err", err) // Reload logged what it applied
			}
		}
	}
	if *memProfile != "" { // the heap of the running node, before it stops
		if err := writeHeapProfile(*memProfile); err != nil {
			logger.Error("heap profile", "err", err)
		}
	}
	logger.Info("stopping: finishing in-flight requests")
	if err := n.Wait(); err != nil {
		logger.Error("stopped with an error", "err", err)
		return exitFail
	}
	logger.Info("stopped")
	return exitOK
}

// warnOverridden says which settings of the file a flag or a SNAPNODE_*
// variable overrides (config.Sources.LoadOverridden), whose values in the
// file are not used: an edit of them, and the SIGHUP after it, would
// otherwise change nothing without a word.
func warnOverridden(logger *slog.Logger, file string, overridden []string) {
	if len(overridden) > 0 {
		logger.Warn("settings of the file overridden by a flag or a SNAPNODE_* variable: the file's values are not used", "file", file, "settings", overridden)
	}
}

// selfCommand is how the user can run this program again: the binary as
// invoked, or `go run ./cmd/snapnode` when it was built by go run.
func selfCommand() string {
	exe := os.Args[0]
	if strings.Contains(exe, "go-build") {
		return "go run ./cmd/snapnode"
	}
	if !strings.ContainsRune(exe, filepath.Separator) {
		return exe // found on PATH
	}
	if abs, err := filepath.Abs(exe); err == nil {
		return abs
	}
	return exe
}

// writeHeapProfile writes the heap profile to path: what is in use after a
// collection, and what was allocated since the start.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}
