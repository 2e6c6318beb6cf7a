package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// exitTimeout is the exit code of a request that got no valid answer.
const exitTimeout = 3

// clientFlags are the flags of the commands that message an agent.
type clientFlags struct {
	to      string
	relays  []string
	keyFile string
	persist bool
	timeout time.Duration
}

func (cf *clientFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&cf.to, "to", "", "the agent's P2TR `ADDRESS` (required)")
	fs.Func("relay", "use the relay at `URL` (repeatable; default ws://127.0.0.1:7447)", func(v string) error {
		cf.relays = append(cf.relays, v)
		return nil
	})
	fs.StringVar(&cf.keyFile, "key", "", "sign with the key in `FILE` (default: $SNAPNODE_KEY, else a client key kept in the user's config folder)")
	fs.BoolVar(&cf.persist, "persist", false, "send as a stored event (kind 4339), which reaches an agent that is offline now")
	fs.DurationVar(&cf.timeout, "timeout", 30*time.Second, "give up after `DURATION`")
}

// send is `snapnode send`: message/send with a text or data part.
func (c *cli) send(args []string) int {
	fs := c.flagSet("send", "--to ADDRESS [--relay URL] [--key FILE] [--persist] [--task ID] [--data FILE] [TEXT…]",
		"Sends a message/send request to an agent over Nostr and prints its verified",
		"response. Exit status: 0 a result, 1 a SNAP error response, 2 usage, 3 no valid",
		"response in time.")
	var cf clientFlags
	cf.define(fs)
	taskID := fs.String("task", "", "continue the task `ID` instead of starting one")
	dataFile := fs.String("data", "", "send the JSON object in `FILE` as a data part")
	pos, code, done := c.parse(fs, args, -1)
	if done {
		return code
	}
	var part map[string]any
	switch text := strings.Join(pos, " "); {
	case *dataFile != "" && text != "":
		return c.usageError(fs, "give TEXT or --data, not both")
	case *dataFile != "":
		b, err := os.ReadFile(*dataFile)
		if err != nil {
			return c.ioError("snapnode send", err)
		}
		part = map[string]any{"data": json.RawMessage(b)}
	case text != "":
		part = map[string]any{"text": text}
	default:
		return c.usageError(fs, "nothing to send: give TEXT or --data FILE")
	}
	payload := map[string]any{"message": map[string]any{"messageId": snap.NewID(), "role": "user", "parts": []any{part}}}
	if *taskID != "" {
		payload["taskId"] = *taskID
	}
	return c.request(fs, cf, "message/send", payload)
}

// task is `snapnode task get|cancel ID` (a requester's own tasks on an
// agent, over Nostr) and `snapnode task list|show` (an operator's view of
// the local node's database).
func (c *cli) task(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return c.taskList(args[1:])
		case "show":
			return c.taskShow(args[1:])
		}
	}
	if len(args) == 0 || (args[0] != "get" && args[0] != "cancel") {
		fmt.Fprintln(c.stderr, "usage: snapnode task get|cancel --to ADDRESS [--relay URL] [--key FILE] ID")
		fmt.Fprintln(c.stderr, "       snapnode task list [--state STATE] [--from ADDRESS] [--data-dir DIR]")
		fmt.Fprintln(c.stderr, "       snapnode task show [--data-dir DIR] ID")
		return exitUsage
	}
	sub := args[0]
	fs := c.flagSet("task "+sub, "--to ADDRESS [--relay URL] [--key FILE] [--history N] ID",
		"Asks an agent for one of your tasks (tasks/get) or cancels it (tasks/cancel).")
	var cf clientFlags
	cf.define(fs)
	history := -1
	if sub == "get" {
		fs.IntVar(&history, "history", -1, "return at most the last `N` history messages (default: all)")
	}
	pos, code, done := c.parse(fs, args[1:], 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the task ID")
	}
	payload := map[string]any{"taskId": pos[0]}
	if history >= 0 {
		payload["historyLength"] = history
	}
	return c.request(fs, cf, "tasks/"+sub, payload)
}

// request discovers the agent, sends one request and prints the verified
// response as one line of JSON.
func (c *cli) request(fs *flag.FlagSet, cf clientFlags, method string, payload any) int {
	prog := "snapnode " + fs.Name()
	if cf.to == "" {
		return c.usageError(fs, "--to ADDRESS is required")
	}
	if _, err := identity.ParseAddress(cf.to); err != nil {
		return c.usageError(fs, err.Error())
	}
	if len(cf.relays) == 0 {
		cf.relays = []string{"ws://127.0.0.1:7447"}
	}
	key, err := clientKey(cf.keyFile, c)
	if err != nil {
		return c.ioError(prog, err)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return c.fail(prog, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: cf.relays, Logger: quietLogger(c)})
	pool.Start(ctx)
	defer pool.Close()

	found, rejected, err := relay.DiscoverByIdentity(ctx, pool, cf.to)
	for _, r := range rejected {
		fmt.Fprintf(c.stderr, "%s: REJECTED card event %s from %s: %v\n", prog, r.EventID, r.PubKey, r.Err)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: no valid card for %s on %s: %v\n", prog, cf.to, strings.Join(cf.relays, ", "), err)
		return exitTimeout
	}
	client := relay.NewClient(relay.ClientConfig{Key: key, Transport: pool, Logger: quietLogger(c)})
	resp, err := client.Request(ctx, relay.Target{Address: cf.to, PubKey: found.PubKey},
		relay.Request{Method: method, Payload: body, Persist: cf.persist})
	if errors.Is(err, relay.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(c.stderr, "%s: %v\n", prog, err)
		return exitTimeout
	}
	if err != nil {
		return c.fail(prog, err)
	}
	out, _ := resp.MarshalJSON()
	fmt.Fprintf(c.stdout, "%s\n", out)
	var p struct {
		Error *snap.Error `json:"error"`
	}
	if json.Unmarshal(resp.Payload, &p) == nil && p.Error != nil {
		return exitFail
	}
	return exitOK
}

// clientKey returns the key to sign requests with: --key, else
// SNAPNODE_KEY, else the client key in the user's config folder, created
// on first use.
func clientKey(file string, c *cli) (*identity.Key, error) {
	k, err := identity.Load(file)
	if !errors.Is(err, identity.ErrNoKey) {
		return k, err
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "snapnode", "client.key")
	if k, err := identity.LoadKeyFile(path); err == nil {
		return k, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if k, err = identity.Generate(); err != nil {
		return nil, err
	}
	if err := identity.SaveKeyFile(path, k); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.stderr, "created a client identity %s in %s\n", k.Address(identity.Mainnet), path)
	return k, nil
}
