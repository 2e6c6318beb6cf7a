package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/shellword"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// exitTimeout is the exit code of a request that got no valid answer.
const exitTimeout = 3

// clientFlags are the flags of the commands that message an agent.
type clientFlags struct {
	to        string
	relays    []string
	http      string
	keyFile   string
	persist   bool
	fallback  bool
	private   bool // --private-endpoints
	timeout   time.Duration
	defaulted bool // no --relay or --http: the default relay
}

// defaultRelay is the relay of the client commands given no --relay: the
// embedded relay of a node run on this machine with its defaults.
const defaultRelay = "ws://127.0.0.1:7447"

// unreachableHint follows the error of a command that reached no relay,
// when it was given none: it says what the default is and what to give.
func (c *cli) unreachableHint(prog string, err error, defaulted bool) {
	if defaulted && errors.Is(err, client.ErrUnreachable) {
		fmt.Fprintf(c.stderr, "%s: no --relay was given, and %s (the embedded relay of a node running here with its defaults) does not answer: start one (snapnode run), or give --relay URL (or --http URL for an agent's HTTP endpoint)\n", prog, defaultRelay)
	}
}

// relayFlag defines --relay, the relays of a client command (repeatable;
// none: defaultRelay), appending each to relays.
func relayFlag(fs *flag.FlagSet, relays *[]string) {
	fs.Func("relay", "use the relay at `URL` (repeatable; default "+defaultRelay+")", func(v string) error {
		*relays = append(*relays, v)
		return nil
	})
}

// define defines the flags; timeout is the default of --timeout.
func (cf *clientFlags) define(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&cf.to, "to", "", "the agent's P2TR `ADDRESS` (required)")
	fs.StringVar(&cf.http, "http", "", "send over HTTP to the agent's endpoint `URL` instead of Nostr (http(s)://host:port[/snap]; a ws:// or wss:// URL uses WebSocket)")
	relayFlag(fs, &cf.relays)
	fs.StringVar(&cf.keyFile, "key", "", "sign with the key in `FILE` (default: $SNAPNODE_KEY, else a client key kept in the user's config folder)")
	fs.BoolVar(&cf.persist, "persist", false, "send as a stored event (kind 4339), which reaches an agent that is offline now")
	fs.BoolVar(&cf.fallback, "fallback", false, "follow the agent's card found on the relays: its HTTP and WebSocket endpoints in the order it declares them, each tried again after 1, 2 and 4 s, then Nostr when the card names relays (the SNAP fallback strategy)")
	fs.BoolVar(&cf.private, "private-endpoints", false, "with --fallback, connect to the card's endpoints on loopback, link-local, private and other non-public addresses too (off: such an endpoint is skipped for the card's next, as anyone can publish a card); for an agent on this machine or network")
	fs.DurationVar(&cf.timeout, "timeout", timeout, "give up after `DURATION`")
}

// send is `snapnode send`: message/send with a text or data part.
func (c *cli) send(args []string) int {
	fs := c.flagSet("send")
	var cf clientFlags
	cf.define(fs, 30*time.Second)
	taskID := fs.String("task", "", "continue the task `ID` instead of starting one")
	dataFile := fs.String("data", "", "send the JSON object in `FILE` as a data part")
	key := fs.String("idempotency-key", "", "send with the idempotency `KEY`: the agent answers a repeat of it with the task it made the first time (with --persist or --fallback a new key is made when none is given)")
	pos, code, done := c.parse(fs, args, -1)
	if done {
		return code
	}
	payload, code, ok := c.messagePayload(fs, strings.Join(pos, " "), *dataFile, *taskID)
	if !ok {
		return code
	}
	if *key == "" && (cf.persist || cf.fallback) {
		// A stored request may be delivered late, and a fallback may send
		// it again by another way: one key makes one task of them.
		*key = snap.NewID()
	}
	if *key != "" {
		payload["idempotencyKey"] = *key
	}
	return c.request(fs, cf, "message/send", payload)
}

// messagePayload is the payload of message/send and message/stream: one
// user message with a text part, or a data part read from dataFile, and
// the task it continues.
func (c *cli) messagePayload(fs *flag.FlagSet, text, dataFile, taskID string) (map[string]any, int, bool) {
	var part map[string]any
	switch {
	case dataFile != "" && text != "":
		return nil, c.usageError(fs, "give TEXT or --data, not both"), false
	case dataFile != "":
		b, err := os.ReadFile(dataFile)
		if err != nil {
			return nil, c.ioError(fs.Name(), err), false
		}
		part = map[string]any{"data": json.RawMessage(b)}
	case text != "":
		part = map[string]any{"text": text}
	default:
		return nil, c.usageError(fs, "nothing to send: give TEXT or --data FILE"), false
	}
	payload := map[string]any{"message": map[string]any{"messageId": snap.NewID(), "role": "user", "parts": []any{part}}}
	if taskID != "" {
		payload["taskId"] = taskID
	}
	return payload, 0, true
}

// task is `snapnode task get|cancel ID` (a requester's own tasks on an
// agent, over Nostr) and `snapnode task list|show` (an operator's view of
// the local node's database).
func (c *cli) task(args []string) int {
	remote := func(sub string) func(*cli, []string) int {
		return func(c *cli, args []string) int { return c.taskRemote(sub, args) }
	}
	return c.dispatch("task", args, []subcommand{
		{"get", remote("get")},
		{"cancel", remote("cancel")},
		{"list", (*cli).taskList},
		{"show", (*cli).taskShow},
	},
		"usage: snapnode task get|cancel --to ADDRESS [--relay URL [--fallback [--private-endpoints]] | --http URL] [--key FILE] ID",
		"       snapnode task list [--state STATE] [--from ADDRESS] [--data-dir DIR]",
		"       snapnode task show [--data-dir DIR] ID")
}

// taskRemote is `snapnode task get|cancel ID` (sub is "get" or "cancel"):
// tasks/get or tasks/cancel of one of the requester's tasks on an agent.
func (c *cli) taskRemote(sub string, args []string) int {
	fs := c.flagSet("task " + sub)
	var cf clientFlags
	cf.define(fs, 30*time.Second)
	var history optionalCount
	if sub == "get" {
		fs.Var(&history, "history", "return at most the last `N` history messages (default: all)")
	}
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the task ID")
	}
	payload := map[string]any{"taskId": pos[0]}
	if history.set {
		payload["historyLength"] = history.n
	}
	return c.request(fs, cf, "tasks/"+sub, payload)
}

// request sends one request, over Nostr to the agent found on the relays
// or over HTTP with --http, and prints the verified response as one line
// of JSON.
func (c *cli) request(fs *flag.FlagSet, cf clientFlags, method string, payload any) int {
	return c.exchange(fs, cf, method, payload, nil)
}

// exchange is request for any method: when events is set, the events of
// a streaming method are shown there as they arrive, before the response.
func (c *cli) exchange(fs *flag.FlagSet, cf clientFlags, method string, payload any, events eventPrinter) int {
	prog := fs.Name()
	if code, ok := c.checkTarget(fs, &cf); !ok {
		return code
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
	var onEvent func(*snap.Message) error
	if events != nil {
		onEvent = func(m *snap.Message) error {
			if err := events.event(m); err != nil {
				return fmt.Errorf("%w: %w", errEventOutput, err)
			}
			return nil
		}
	}
	var (
		agent client.Transport
		where string // what a failure names: the endpoint, or nothing over Nostr
	)
	if cf.http != "" {
		where, _ = endpointURL(cf.http) // checkTarget checked it
		agent = client.NewHTTP(client.HTTPConfig{Key: key}).To(where, cf.to)
	} else {
		relays := client.DialRelays(ctx, cf.relays, quietLogger(c))
		defer relays.Close()
		target, rejected, err := relays.FindAgent(ctx, cf.to)
		c.rejectedCards(prog, rejected)
		if err != nil {
			code := c.exchangeError(prog, fmt.Errorf("%w: %w", errNoValidAnswer, err))
			c.unreachableHint(prog, err, cf.defaulted)
			return code
		}
		agent = relays.Nostr(key, quietLogger(c)).To(target, cf.persist)
		if cf.fallback {
			agent, err = client.ToCard(target.Card, client.NewHTTP(client.HTTPConfig{Key: key, Net: client.NetConfig{RefusePrivate: !cf.private}}), agent,
				client.FallbackConfig{OnRefused: func(endpoint string, err error) { c.refusedEndpoint(prog, endpoint, err) }})
			if err != nil {
				return c.fail(prog, err)
			}
		}
	}
	var resp *snap.Message
	if onEvent == nil {
		resp, err = agent.Send(ctx, method, body)
	} else {
		resp, err = agent.Stream(ctx, method, body, onEvent)
	}
	if events != nil {
		events.done()
	}
	if err != nil {
		code := c.exchangeError(prog, c.noAnswer(prog, cf, where, body, err))
		c.takenHint(prog, cf, method, body, err)
		if w, ok := events.(interface{ waiting() bool }); ok && w.waiting() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			fmt.Fprintf(c.stderr, "%s: --timeout %v ended the wait; the task still waits for input: resubscribe to follow it again\n", prog, cf.timeout)
		} else if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errEventOutput) {
			// Whatever the wait ended in (a read, a dial, the
			// subscription), the time-out ended it.
			fmt.Fprintf(c.stderr, "%s: the agent did not answer within --timeout %v: it may be offline, busy or slow; try again later, or give a longer --timeout\n", prog, cf.timeout)
		}
		return code
	}
	code := c.printResponse(prog, resp)
	if c.terminal {
		c.taskSummary(resp.Payload, cf.next)
	}
	return code
}

// taskSummary tells a reader at a terminal, on stderr, what the JSON line
// of a response carrying a task says: the task's id (payload.task.id, not
// the message's id, or a bare task's), its state and status note, and
// then the line next gives for the task (the command that follows it, or
// reads it again once it has ended). Piped output is the JSON line alone.
func (c *cli) taskSummary(payload []byte, next func(id string, ended bool) string) {
	id, s, message := snap.ResultTask(payload)
	if id == "" {
		return
	}
	state := tasks.State(s)
	line := "task " + id + ": " + string(state)
	if note := printable(strings.Join(strings.Fields(message), " ")); note != "" {
		line += " — " + note
	}
	fmt.Fprintln(c.stderr, line)
	fmt.Fprintln(c.stderr, next(id, state.Terminal()))
}

// next is the command a requester runs after a response carrying a task:
// the one that reads it again once it has ended, else the one that
// follows it, reaching the same agent as cf.
func (cf clientFlags) next(id string, ended bool) string {
	if ended {
		return "read it again: snapnode task get " + cf.command() + " " + shellWord(id)
	}
	return "follow it: snapnode stream " + cf.command() + " --task " + shellWord(id) + " --resubscribe"
}

// command is the flags that reach the same agent as cf, with the same key,
// as a command line gives them.
func (cf clientFlags) command() string {
	words := []string{"--to", shellWord(cf.to)}
	if cf.keyFile != "" {
		words = append(words, "--key", shellWord(cf.keyFile))
	}
	if cf.http != "" {
		words = append(words, "--http", shellWord(cf.http))
	}
	if !cf.defaulted {
		for _, r := range cf.relays {
			words = append(words, "--relay", shellWord(r))
		}
	}
	if cf.fallback {
		words = append(words, "--fallback")
	}
	if cf.private {
		words = append(words, "--private-endpoints")
	}
	return strings.Join(words, " ")
}

// shellWord quotes s for a POSIX shell when it needs it (shellword.Quote,
// as the console's hints do).
func shellWord(s string) string { return shellword.Quote(s) }

// noAnswer marks the failures of an exchange that mean no valid response
// came (exit status 3); a request persisted on the relays says how to find
// the task it makes.
func (c *cli) noAnswer(prog string, cf clientFlags, endpoint string, body []byte, err error) error {
	switch {
	case errors.Is(err, errEventOutput):
		return err
	case endpoint != "":
		return fmt.Errorf("%w: %s: %w", errNoValidAnswer, endpoint, err)
	case errors.Is(err, client.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		if cf.persist {
			// The request waits on the relays: say how to find its task.
			var p struct {
				Key string `json:"idempotencyKey"`
			}
			if json.Unmarshal(body, &p) == nil && p.Key != "" {
				fmt.Fprintf(c.stderr, "%s: the request is stored on the relays and reaches the agent when it comes online; to get the task it makes, send it again with --idempotency-key %s\n", prog, p.Key)
			}
		}
		return fmt.Errorf("%w: %w", errNoValidAnswer, err)
	}
	return err
}

// takenHint follows the error of a message/send or message/stream that
// the agent's endpoint may have taken (client.Taken: answered HTTP 500 or
// 204, or sent in full and then met by a connection that went quiet or
// closed before any answer), as an agent of the reference SDK answers
// when its handler failed: the agent may have acted on the message all
// the same. It says so, and how
// to look before sending it again.
func (c *cli) takenHint(prog string, cf clientFlags, method string, body []byte, err error) {
	if (method != "message/send" && method != "message/stream") || !client.Taken(err) {
		return
	}
	var p struct {
		TaskID string `json:"taskId"`
		Key    string `json:"idempotencyKey"`
	}
	_ = json.Unmarshal(body, &p)
	const took = "the agent's endpoint took the message and gave no SNAP response, as an agent built on the reference TypeScript SDK does when it failed"
	if p.TaskID != "" {
		via := ""
		if cf.keyFile != "" {
			// Only the task's requester sees it.
			via = " --key " + cf.keyFile
		}
		if cf.http != "" {
			via += " --http " + cf.http
		} else if !cf.defaulted {
			for _, r := range cf.relays {
				via += " --relay " + r
			}
		}
		fmt.Fprintf(c.stderr, "%s: %s: it may have added the message to task %s all the same, and sending it again could add it twice; see the task as it is now with: snapnode task get --to %s%s %s\n",
			prog, took, p.TaskID, cf.to, via, p.TaskID)
		return
	}
	again := "its id is not known here, and sending the message again could make a second one"
	if p.Key != "" {
		again = "its id is not known here; sending the message again with --idempotency-key " + p.Key +
			" gets the task the first made from an agent that keeps idempotency keys, and makes a second one on an agent that keeps none"
	}
	fmt.Fprintf(c.stderr, "%s: %s: it may have made the task all the same; %s\n", prog, took, again)
}

// checkTarget checks --to and the transport flags, defaulting to the
// local embedded relay.
func (c *cli) checkTarget(fs *flag.FlagSet, cf *clientFlags) (int, bool) {
	if cf.to == "" {
		return c.usageError(fs, "--to ADDRESS is required"), false
	}
	if _, err := identity.ParseAddress(cf.to); err != nil {
		return c.usageError(fs, "--to: "+err.Error()), false
	}
	if cf.timeout <= 0 {
		return c.usageError(fs, fmt.Sprintf("--timeout %v: want more than 0", cf.timeout)), false
	}
	if cf.http != "" {
		if len(cf.relays) > 0 || cf.persist {
			return c.usageError(fs, "--http sends over HTTP: --relay and --persist are for Nostr"), false
		}
		if cf.fallback {
			return c.usageError(fs, "--http names the endpoint: --fallback follows the endpoints of the card found on the relays"), false
		}
		if _, err := endpointURL(cf.http); err != nil {
			return c.usageError(fs, "--http: "+err.Error()), false
		}
	} else if len(cf.relays) == 0 {
		cf.relays, cf.defaulted = []string{defaultRelay}, true
	}
	if cf.private && !cf.fallback {
		return c.usageError(fs, "--private-endpoints is for --fallback: it lets the card's endpoints be on non-public addresses"), false
	}
	return 0, true
}

// endpointURL is the SNAP endpoint of --http: the URL as given, with the
// path /snap when it has none. A ws:// or wss:// URL speaks WebSocket.
func endpointURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--http: %w", err)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return "", fmt.Errorf("--http %q: want an http://, https://, ws:// or wss:// URL", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("--http %q: no host", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/snap"
	}
	return u.String(), nil
}

// refusedEndpoint tells, on stderr, that the command did not connect to
// endpoint, one of the agent's card, as err (client.ErrPrivateAddress)
// says: its name resolved to non-public addresses only.
func (c *cli) refusedEndpoint(prog, endpoint string, err error) {
	why := err.Error()
	if _, addrs, ok := strings.Cut(why, client.ErrPrivateAddress.Error()+": "); ok {
		why = addrs // what each address is: "127.0.0.1:7448 is loopback"
	}
	fmt.Fprintf(c.stderr, "%s: not connecting to %s, an endpoint of the agent's card (%s): anyone can publish a card, so --fallback connects to no loopback, link-local, private or other non-public address unless --private-endpoints is given (for an agent on this machine or its network)\n", prog, endpoint, why)
}

// errNoValidAnswer marks the failures that end in exit status 3: no valid
// response came.
var errNoValidAnswer = errors.New("no valid response")

// errEventOutput wraps a failure to print an event.
var errEventOutput = errors.New("output")

// exchangeError reports a failed exchange: exit 3 when no valid response
// came, else 1.
func (c *cli) exchangeError(prog string, err error) int {
	if errors.Is(err, errNoValidAnswer) {
		fmt.Fprintf(c.stderr, "%s: %v\n", prog, err)
		return exitTimeout
	}
	return c.fail(prog, err)
}

// printResponse prints the response as one line of JSON; a SNAP error in
// its payload makes the exit status 1.
func (c *cli) printResponse(prog string, resp *snap.Message) int {
	out, err := resp.MarshalJSON()
	if err != nil {
		return c.fail(prog, err)
	}
	fmt.Fprintf(c.stdout, "%s\n", out)
	if snap.ResponseError(resp.Payload) != nil {
		return exitFail
	}
	return exitOK
}

// clientKey returns the key to sign requests with: --key, else
// SNAPNODE_KEY, else the client key in the user's config folder, created
// on first use.
func clientKey(file string, c *cli) (*identity.Key, error) {
	k, err := loadKey(file)
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
