package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// sign reads a (possibly partial) SNAP message, fills the absent envelope
// fields with snap.Prepare, checks it with snap.Parse, signs it and prints
// the signed message as one line of JSON.
func (c *cli) sign(args []string) int {
	fs := c.flagSet("sign")
	sg := signingFlags(fs, "from", "use `UNIX` seconds as the timestamp when the message has none (default: the current time)")
	k, raw, code, ok := c.keyAndInput(fs, sg, args)
	if !ok {
		return code
	}
	const prog = "snapnode sign"
	raw, err := snap.Prepare(raw, k.Address(network(sg.testnet)), sg.now.or(time.Now()))
	if err != nil {
		return c.fail(prog, err)
	}
	m, err := snap.Parse(raw)
	if err != nil {
		return c.fail(prog, err)
	}
	if err := m.Sign(k); err != nil {
		return c.fail(prog, err)
	}
	out, err := m.MarshalJSON()
	if err != nil {
		return c.fail(prog, err)
	}
	if _, err := fmt.Fprintf(c.stdout, "%s\n", out); err != nil {
		return c.ioError(prog, err)
	}
	return exitOK
}

// verifyResult is what verify prints for a valid message.
type verifyResult struct {
	OK     bool   `json:"ok"`
	From   string `json:"from"`
	Signed bool   `json:"signed"`
}

// verify validates one SNAP message with a stateless snap.Validator (no
// replay store, no recipient) and prints the result.
func (c *cli) verify(args []string) int {
	fs := c.flagSet("verify")
	var now unixTime
	fs.Var(&now, "now", "check the timestamp against `UNIX` seconds instead of the current time")
	drift := fs.Int64("drift", int64(snap.DefaultMaxDrift/time.Second), "accept timestamps at most `SECONDS` from the clock")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	const prog = "snapnode verify"
	if *drift < 0 || *drift > math.MaxInt64/int64(time.Second) {
		return c.usageError(fs, fmt.Sprintf("--drift %d: want 0 or more seconds", *drift))
	}
	maxDrift := time.Duration(*drift) * time.Second
	if maxDrift == 0 {
		// snap.Config reads 0 as "the default"; any duration under a
		// second allows no drift at all.
		maxDrift = time.Nanosecond
	}
	cfg := snap.Config{MaxDrift: maxDrift}
	if now.set {
		cfg.Now = func() time.Time { return now.t }
	}
	raw, err := c.readInput(pos)
	if err != nil {
		return c.ioError(prog, err)
	}
	v, err := snap.NewValidator(cfg).Validate(context.Background(), raw)
	if err != nil {
		return c.fail(prog, err)
	}
	return c.printJSON(prog, verifyResult{OK: true, From: v.From, Signed: v.Signed})
}
