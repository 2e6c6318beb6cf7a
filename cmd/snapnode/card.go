package main

import (
	"fmt"
	"io"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// card dispatches "card sign" and "card verify".
func (c *cli) card(args []string) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: snapnode card <sign|verify> [flags] [FILE|-]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "  sign     sign an Agent Card; prints the well-known document {card,sig,publicKey,timestamp}")
		fmt.Fprintln(w, "  verify   verify a signed Agent Card document")
	}
	if len(args) == 0 {
		usage(c.stderr)
		return exitUsage
	}
	switch args[0] {
	case "sign":
		return c.cardSign(args[1:])
	case "verify":
		return c.cardVerify(args[1:])
	case "-h", "-help", "--h", "--help":
		usage(c.stderr)
		fmt.Fprintln(c.stderr, "\n(snapnode help card sign lists its flags)")
		return exitOK
	}
	c.unknownSub("card", args, "sign", "verify")
	usage(c.stderr)
	return exitUsage
}

// cardSign reads an Agent Card, gives it the key's address when it has no
// identity, signs it and prints the signed card document.
func (c *cli) cardSign(args []string) int {
	fs := c.flagSet("card sign")
	sg := signingFlags(fs, "identity", "sign at `UNIX` seconds instead of the current time")
	k, raw, code, ok := c.keyAndInput(fs, sg, args)
	if !ok {
		return code
	}
	const prog = "snapnode card sign"
	raw, err := snap.PrepareCard(raw, k.Address(network(sg.testnet)))
	if err != nil {
		return c.fail(prog, err)
	}
	card, err := snap.ParseCard(raw)
	if err != nil {
		return c.fail(prog, err)
	}
	signed, err := snap.SignCard(card, k, sg.now.or(time.Now()))
	if err != nil {
		return c.fail(prog, err)
	}
	return c.printJSON(prog, signed)
}

// cardVerifyResult is what card verify prints for a valid document.
type cardVerifyResult struct {
	OK       bool   `json:"ok"`
	Identity string `json:"identity"`
	Name     string `json:"name"`
}

// cardVerify checks a signed card document with snap.VerifySignedCard.
func (c *cli) cardVerify(args []string) int {
	fs := c.flagSet("card verify")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	const prog = "snapnode card verify"
	raw, err := c.readInput(pos)
	if err != nil {
		return c.ioError(prog, err)
	}
	card, _, err := snap.VerifySignedCard(raw)
	if err != nil {
		return c.fail(prog, err)
	}
	return c.printJSON(prog, cardVerifyResult{OK: true, Identity: card.Identity, Name: card.Name})
}
