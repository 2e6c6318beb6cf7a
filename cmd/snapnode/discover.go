package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
)

// discover is `snapnode discover --identity ADDR | --skill ID` on the
// relays, or `snapnode discover --http URL` for a well-known card.
func (c *cli) discover(args []string) int {
	fs := c.flagSet("discover")
	id := fs.String("identity", "", "the agent's P2TR `ADDRESS`")
	skill := fs.String("skill", "", "agents offering the skill `ID`")
	httpURL := fs.String("http", "", "fetch the signed card served at the base `URL` (http(s)://host:port)")
	var relays []string
	relayFlag(fs, &relays)
	timeout := fs.Duration("timeout", 10*time.Second, "give up after `DURATION`")
	_, code, done := c.parse(fs, args, 0)
	if done {
		return code
	}
	if *timeout <= 0 {
		return c.usageError(fs, fmt.Sprintf("--timeout %v: want more than 0", *timeout))
	}
	if *httpURL != "" {
		if *skill != "" || len(relays) > 0 {
			return c.usageError(fs, "--http reads one agent's well-known card: --skill and --relay are for the relays")
		}
		return c.discoverHTTP(*httpURL, *id, *timeout)
	}
	if (*id == "") == (*skill == "") {
		return c.usageError(fs, "give exactly one of --identity and --skill")
	}
	defaulted := len(relays) == 0
	if defaulted {
		relays = []string{defaultRelay}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	pool := client.DialRelays(ctx, relays, quietLogger(c))
	defer pool.Close()
	found, rejected, err := pool.Discover(ctx, *id, *skill)
	c.rejectedCards("snapnode discover", rejected)
	if err != nil {
		fmt.Fprintf(c.stderr, "snapnode discover: %v\n", err)
		c.unreachableHint("snapnode discover", err, defaulted)
		return exitFail
	}
	for _, d := range found {
		line, _ := json.Marshal(map[string]any{"identity": d.Card.Identity, "pubkey": d.PubKey, "createdAt": d.CreatedAt.Unix(), "card": d.Card})
		fmt.Fprintf(c.stdout, "%s\n", line)
	}
	return exitOK
}

// rejectedCards prints on stderr the card events a discovery dropped:
// the first few (client.Rejections keeps them) with why, then how many
// more, and why the discovery stopped before the oldest card, if it did.
func (c *cli) rejectedCards(prog string, r client.Rejections) {
	for _, x := range r.First {
		fmt.Fprintf(c.stderr, "%s: REJECTED card event %s from %s: %v\n", prog, x.EventID, x.PubKey, x.Err)
	}
	if more := r.Count - len(r.First); more > 0 {
		fmt.Fprintf(c.stderr, "%s: REJECTED %d more card events (%d in all)\n", prog, more, r.Count)
	}
	if r.Cut != "" {
		fmt.Fprintf(c.stderr, "%s: discovery %s\n", prog, r.Cut)
	}
}

// quietLogger logs warnings and errors of client commands, and of the
// stores an operator command opens (openStores), to stderr.
func quietLogger(c *cli) *slog.Logger {
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// discoverHTTP fetches and verifies the well-known card at base.
func (c *cli) discoverHTTP(base, id string, timeout time.Duration) int {
	const prog = "snapnode discover"
	if id != "" {
		if _, err := identity.ParseAddress(id); err != nil {
			return c.ioError(prog, fmt.Errorf("--identity: %w", err))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	card, signed, err := client.NewHTTP(client.HTTPConfig{}).Discover(ctx, base)
	if err != nil {
		if root, ok := endpointBase(base, err); ok {
			fmt.Fprintf(c.stderr, "%s: %s is a SNAP endpoint, not the agent's base URL: try --http %s (the card is at its /.well-known/snap-agent.json)\n", prog, base, root)
		}
		return c.fail(prog, err)
	}
	if id != "" && card.Identity != id {
		fmt.Fprintf(c.stderr, "%s: the card at %s is %s's, not %s's\n", prog, base, card.Identity, id)
		return exitFail
	}
	line, _ := json.Marshal(map[string]any{"identity": card.Identity, "publicKey": signed.PublicKey,
		"timestamp": signed.Timestamp, "sig": signed.Sig, "card": json.RawMessage(signed.Card)})
	fmt.Fprintf(c.stdout, "%s\n", line)
	return exitOK
}

// endpointBase says whether err, base's card not found, comes of base
// being the SNAP endpoint a node prints and cards declare (…/snap) where
// discover wants the base URL the well-known path is appended to, and
// returns that base URL.
func endpointBase(base string, err error) (string, bool) {
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
		return "", false
	}
	root, ok := strings.CutSuffix(strings.TrimSuffix(base, "/"), "/snap")
	return root, ok && root != ""
}
