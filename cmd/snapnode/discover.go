package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/snapnode/snapnode/relay"
)

// discover is `snapnode discover --identity ADDR | --skill ID`.
func (c *cli) discover(args []string) int {
	fs := c.flagSet("discover", "--identity ADDRESS | --skill ID [--relay URL]",
		"Finds agent cards on the relays. A card counts only when its d tag, its identity",
		"and the P2TR address of the event's key agree; impostor cards are reported on",
		"standard error and dropped; the newest valid card of each agent wins. Prints one",
		"JSON line per agent: {identity, pubkey, createdAt, card}.")
	id := fs.String("identity", "", "the agent's P2TR `ADDRESS`")
	skill := fs.String("skill", "", "agents offering the skill `ID`")
	var relays []string
	fs.Func("relay", "use the relay at `URL` (repeatable; default ws://127.0.0.1:7447)", func(v string) error {
		relays = append(relays, v)
		return nil
	})
	timeout := fs.Duration("timeout", 10*time.Second, "give up after `DURATION`")
	_, code, done := c.parse(fs, args, 0)
	if done {
		return code
	}
	if (*id == "") == (*skill == "") {
		return c.usageError(fs, "give exactly one of --identity and --skill")
	}
	if len(relays) == 0 {
		relays = []string{"ws://127.0.0.1:7447"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: relays, Logger: quietLogger(c)})
	pool.Start(ctx)
	defer pool.Close()

	var found []relay.Discovered
	var rejected []relay.Rejected
	var err error
	if *id != "" {
		var d *relay.Discovered
		d, rejected, err = relay.DiscoverByIdentity(ctx, pool, *id)
		if d != nil {
			found = append(found, *d)
		}
	} else {
		found, rejected, err = relay.DiscoverBySkill(ctx, pool, *skill)
	}
	for _, r := range rejected {
		fmt.Fprintf(c.stderr, "snapnode discover: REJECTED card event %s from %s: %v\n", r.EventID, r.PubKey, r.Err)
	}
	for _, d := range found {
		line, _ := json.Marshal(map[string]any{"identity": d.Card.Identity, "pubkey": d.PubKey, "createdAt": d.CreatedAt.Unix(), "card": d.Card})
		fmt.Fprintf(c.stdout, "%s\n", line)
	}
	if len(found) == 0 {
		if err == nil {
			err = relay.ErrNotFound
		}
		fmt.Fprintf(c.stderr, "snapnode discover: %v\n", err)
		return exitFail
	}
	return exitOK
}

// quietLogger logs warnings and errors of client commands to stderr.
func quietLogger(c *cli) *slog.Logger {
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
