package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// runNode is `snapnode run`: the daemon.
func (c *cli) runNode(args []string) int {
	fs := c.flagSet("run", "[flags]",
		"Runs the node: with no configuration it creates its data folder and identity,",
		"starts the embedded relay on 127.0.0.1:7447, publishes its agent card and answers",
		"SNAP requests until SIGINT or SIGTERM. Settings: flags, then SNAPNODE_* variables,",
		"then the TOML file of --config, then defaults.")
	cfg := config.Default()
	config.Flags(fs, &cfg)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE` (for go tool pprof)")
	_, code, done := c.parse(fs, args, 0)
	if done {
		return code
	}
	if err := config.Load(&cfg, fs, os.Getenv); err != nil {
		return c.configError(fs, err)
	}
	logger := cfg.Logger(c.stderr)

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
	n, err := node.Start(ctx, cfg, logger)
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
	// SIGHUP re-reads the settings, republishes the card if it changed and
	// reloads the policy (a policy that does not load leaves the old one
	// in force).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-hup:
			fresh := config.Default()
			if err := config.Load(&fresh, fs, os.Getenv); err != nil {
				logger.Error("SIGHUP: settings not reloaded", "err", err)
				continue
			}
			if e, err := n.ReloadPolicy(fresh.Policy); err != nil {
				logger.Error("SIGHUP: policy not reloaded; the previous one stays in force", "err", err)
			} else if e != nil {
				logger.Info("SIGHUP: policy in force", "policy", e.Name(), "policy_version", e.Version())
			}
			if published, err := n.UpdateCard(ctx, fresh.Card); err != nil {
				logger.Error("SIGHUP: card not updated", "err", err)
			} else {
				logger.Info("SIGHUP: settings reloaded", "card_republished", published)
			}
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
