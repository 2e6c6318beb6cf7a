package main

import (
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/internal/suggest"
	"github.com/snapnode/snapnode/snap"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// isTerminal reports whether w is a terminal: a character device that
// answers as one (isTTY), not /dev/null, where a script sends what it
// does not read.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && isTTY(f)
}

// cli is one invocation's standard streams. stdout and stderr write
// every invisible character (see package invisible) as a \u escape: the
// commands print peers', models' and files' text, in JSON lines and in
// logs, and none of it may reorder or hide what an operator reads.
// stderr, read by a person, escapes the ASCII controls besides (but the
// line feed and the tab): a peer's text in an error (an HTTP body, a
// WebSocket close reason) must not drive the terminal.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	terminal       bool                     // stdout is a terminal
	synopses       map[*flag.FlagSet]string // "usage: snapnode …" of each flag set
	// nodeFlags names, for a flag set of nodeFlagSet, the flags of the
	// node's settings (printFlags lists them apart).
	nodeFlags map[*flag.FlagSet]map[string]bool
}

// command is a sub-command; run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(c *cli, args []string) int
}

// commands lists the sub-commands in the order help shows them. It is
// filled in init because card and help refer to it.
var commands []command

func init() {
	commands = []command{
		{"run", "run the node: embedded relay, inbox, tasks, agent card", (*cli).runNode},
		{"send", "send a message/send request to an agent and print its answer", (*cli).send},
		{"stream", "send message/stream (or tasks/resubscribe) and print the events as they come", (*cli).stream},
		{"task", "get or cancel one of your tasks on an agent (task get|cancel ID); list or show the node's tasks (task list|show)", (*cli).task},
		{"held", "list the actions the running node's tasks hold for a decision, with their ids (held [TASK])", (*cli).held},
		{"approve", "approve the action a task of the running node waits on (approve TASK [--action ID])", (*cli).approve},
		{"deny", "deny the action a task of the running node waits on (deny TASK [--action ID])", (*cli).deny},
		{"rollback", "undo a promoted action of the running node (rollback ACTION)", (*cli).rollback},
		{"console-url", "print a one-time login link to the running node's web console", (*cli).consoleURL},
		{"job", "the agent's jobs: list, show the manifest, print the history, replay it (job list|show|history|replay)", (*cli).job},
		{"backup", "copy the node's databases, key, policy and settings into a folder while it runs (backup --out DIR); check or restore one (--check, --restore DIR)", (*cli).backupCommand},
		{"audit", "verify or export the audit log (audit verify, audit export)", (*cli).audit},
		{"policy", "judge a proposal offline and explain the decision (policy check --from ADDR FILE)", (*cli).policyCommand},
		{"bench", "drive a node with simulated peers and print throughput, latency, errors and its CPU and memory", (*cli).bench},
		{"discover", "find agent cards by identity or skill on the relays", (*cli).discover},
		{"keygen", "make a new identity key (optionally from a new BIP-39 mnemonic)", (*cli).keygen},
		{"sign", "fill in the envelope of a SNAP message and sign it", (*cli).sign},
		{"verify", "validate a SNAP message (syntax, timestamp, signature)", (*cli).verify},
		{"card", "sign or verify an Agent Card (card sign, card verify)", (*cli).card},
		{"relay", "run the embedded Nostr relay alone (relay --listen ADDR --db FILE)", (*cli).relay},
		{"version", "print the version, commit and Go version of this binary", (*cli).version},
		{"help", "show this list, or the flags of a command (help <command>)", (*cli).help},
	}
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// run executes snapnode with args (without the program name) and returns
// the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runOn(args, stdin, stdout, stderr, isTerminal(stdout))
}

// runOn is run, told whether stdout is a terminal: the commands print for
// a reader there, and stable machine-readable output elsewhere.
func runOn(args []string, stdin io.Reader, stdout, stderr io.Writer, terminal bool) int {
	c := &cli{stdin: stdin, stdout: invisible.NewWriter(stdout), stderr: invisible.NewTextWriter(stderr), terminal: terminal}
	if len(args) == 0 {
		c.printCommands(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		c.printCommands(stdout)
		return exitOK
	case "-version", "--version":
		return c.version(nil)
	}
	cmd := lookup(args[0])
	if cmd == nil {
		names := make([]string, len(commands))
		for i, cmd := range commands {
			names[i] = cmd.name
		}
		fmt.Fprintf(stderr, "snapnode: unknown command %q%s\n\n", args[0], suggest.DidYouMean(args[0], names, ""))
		c.printCommands(stderr)
		return exitUsage
	}
	return cmd.run(c, args[1:])
}

func (c *cli) printCommands(w io.Writer) {
	fmt.Fprintln(w, "snapnode: a SNAP agent node")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: snapnode <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	width := 0
	for _, cmd := range commands {
		width = max(width, len(cmd.name))
	}
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, cmd.name, cmd.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Exit status: 0 success, 1 invalid input or failure, 2 usage error or unreadable input.")
}

// help prints the command list, or a command's usage, on stdout.
func (c *cli) help(args []string) int {
	if len(args) == 0 {
		c.printCommands(c.stdout)
		return exitOK
	}
	cmd := lookup(args[0])
	switch {
	case cmd == nil:
		fmt.Fprintf(c.stderr, "snapnode help: unknown command %q\n", args[0])
		return exitUsage
	case cmd.name == "help":
		c.printCommands(c.stdout)
		return exitOK
	}
	// A command asked for -h prints its usage and exits 0.
	quiet := &cli{stdin: c.stdin, stdout: c.stdout, stderr: c.stdout}
	return cmd.run(quiet, append(args[1:len(args):len(args)], "-h"))
}

// helpFiles holds the help of each command that takes flags: help/NAME.txt
// (spaces in NAME as dashes) has the synopsis, what follows "usage:
// snapnode NAME", on its first line and the description on the others.
//
//go:embed help/*.txt
var helpFiles embed.FS

// commandHelp returns the synopsis and the description lines of "snapnode
// name". Every command has a help file (TestHelpFiles): a missing one is a
// mistake in this program, not in its input.
func commandHelp(name string) (use string, desc []string) {
	b, err := helpFiles.ReadFile("help/" + strings.ReplaceAll(name, " ", "-") + ".txt")
	if err != nil {
		panic(fmt.Sprintf("snapnode %s has no help file: %v", name, err))
	}
	use, rest, _ := strings.Cut(string(b), "\n")
	if rest = strings.TrimSuffix(rest, "\n"); rest != "" {
		desc = strings.Split(rest, "\n")
	}
	return use, desc
}

// flagSet returns a FlagSet for "snapnode <name>" that reports to stderr,
// with the usage of help/NAME.txt (commandHelp).
func (c *cli) flagSet(name string) *flag.FlagSet {
	use, desc := commandHelp(name)
	fs := flag.NewFlagSet("snapnode "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	if c.synopses == nil {
		c.synopses = make(map[*flag.FlagSet]string)
	}
	c.synopses[fs] = fmt.Sprintf("usage: snapnode %s %s", name, use)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, c.synopses[fs])
		for _, d := range desc {
			fmt.Fprintln(w, d)
		}
		fmt.Fprintln(w)
		c.printFlags(fs)
	}
	return fs
}

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printFlags prints the flags of fs. A command other than run that reads
// the node's settings (nodeFlagSet) lists its own flags first, then the
// settings apart, under a heading: mixed in alphabetical order, approve's
// --action and --diff were two lines among some sixty of run's.
func (c *cli) printFlags(fs *flag.FlagSet) {
	node := c.nodeFlags[fs]
	if len(node) == 0 || fs.Name() == "snapnode run" {
		fs.PrintDefaults()
		return
	}
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	settings := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	own.SetOutput(fs.Output())
	settings.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		into := own
		if node[f.Name] {
			into = settings
		}
		into.Var(f.Value, f.Name, f.Usage)
		into.Lookup(f.Name).DefValue = f.DefValue
	})
	heading := "The node's settings, as snapnode run takes them (--data-dir or --config names the node to act on):"
	if hasFlags(own) {
		own.PrintDefaults()
		heading = "\n" + heading
	}
	fmt.Fprintln(fs.Output(), heading)
	settings.PrintDefaults()
}

// nodeFlagSet is flagSet for a command that reads the node's settings:
// the settings' flags (--config, --data-dir, …) are declared on it and
// fill the returned configuration, which starts as the defaults;
// config.Load then layers the environment and the TOML file under them.
func (c *cli) nodeFlagSet(name string) (*flag.FlagSet, *config.Config) {
	fs := c.flagSet(name)
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	cfg := config.Default()
	config.Flags(fs, &cfg)
	node := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			node[f.Name] = true
		}
	})
	if c.nodeFlags == nil {
		c.nodeFlags = make(map[*flag.FlagSet]map[string]bool)
	}
	c.nodeFlags[fs] = node
	return fs, &cfg
}

// parse parses args with fs, allowing flags after positional arguments, and
// checks the number of positional arguments is at most maxPos (no limit
// when maxPos is negative). When done
// is true the command must return code at once (help, or a usage error
// already reported).
func (c *cli) parse(fs *flag.FlagSet, args []string, maxPos int) (pos []string, code int, done bool) {
	for {
		// The flag package would print the error and every flag; a mistake
		// gets one line, a suggestion and the synopsis instead (usageError).
		out := fs.Output()
		fs.SetOutput(io.Discard)
		err := fs.Parse(args)
		fs.SetOutput(out)
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return nil, exitOK, true
		}
		if err != nil {
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				var names []string
				fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
				msg = "unknown flag --" + name + suggest.DidYouMean(name, names, "--")
			}
			return nil, c.usageError(fs, msg), true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...) // everything after -- is positional
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if maxPos >= 0 && len(pos) > maxPos {
		return nil, c.usageError(fs, fmt.Sprintf("too many arguments: %s", strings.Join(pos, " "))), true
	}
	return pos, exitOK, false
}

// usageError reports msg and the synopsis of fs on stderr, with where to
// find every flag, and returns 2.
func (c *cli) usageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(c.stderr, "%s: %s\n", fs.Name(), msg)
	if syn := c.synopses[fs]; syn != "" {
		fmt.Fprintln(c.stderr, syn)
	}
	fmt.Fprintf(c.stderr, "(snapnode help %s lists every flag)\n", strings.TrimPrefix(fs.Name(), "snapnode "))
	return exitUsage
}

// subcommand is one sub-command of a command that has several
// (`snapnode job list`, `snapnode task get`…); run gets the arguments
// after its name.
type subcommand struct {
	name string
	run  func(c *cli, args []string) int
}

// dispatch runs the sub-command of `snapnode cmd` that args[0] names.
// When none does, it reports the unknown one (unknownSub), prints usage,
// one line each, on stderr and returns 2.
func (c *cli) dispatch(cmd string, args []string, subs []subcommand, usage ...string) int {
	names := make([]string, len(subs))
	for i, sub := range subs {
		if len(args) > 0 && args[0] == sub.name {
			return sub.run(c, args[1:])
		}
		names[i] = sub.name
	}
	c.unknownSub(cmd, args, names...)
	for _, u := range usage {
		fmt.Fprintln(c.stderr, u)
	}
	if len(args) > 0 && isHelpFlag(args[0]) {
		// Help asked for (snapnode help cmd passes -h): the usage is the
		// answer, and each sub-command's flags are one command away.
		fmt.Fprintf(c.stderr, "(snapnode help %s %s lists its flags)\n", cmd, names[0])
		return exitOK
	}
	return exitUsage
}

// optionalCount is a flag of a count, 0 or more, that may be left out:
// unset, it has no value, so its help says its default in words alone
// (a default of -1 was printed as "(default -1)" after them).
type optionalCount struct {
	n   int64
	set bool
}

func (o *optionalCount) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.n, 10)
}

func (o *optionalCount) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number, 0 or more")
	}
	o.n, o.set = n, true
	return nil
}

// isHelpFlag reports whether arg asks for help, as the flag package
// takes it: -h, -help, --h or --help.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// unknownSub reports, for `snapnode cmd`, a sub-command that is none of
// subs, with the nearest one when it looks like a typo (nothing when args
// is empty: the caller prints its usage either way).
func (c *cli) unknownSub(cmd string, args []string, subs ...string) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return
	}
	fmt.Fprintf(c.stderr, "snapnode %s: unknown sub-command %q%s\n", cmd, args[0], suggest.DidYouMean(args[0], subs, ""))
}

// loadKey is identity.Load (the key file, else SNAPNODE_KEY), saying how
// to make the key when the file named does not exist.
func loadKey(file string) (*identity.Key, error) {
	k, err := identity.Load(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the key file %s does not exist (snapnode keygen --out %s makes one)", file, file)
	}
	return k, err
}

// configError reports a setting that could not be loaded (a bad value, a
// configuration file that does not parse) and returns 2. It is not a
// mistake in the command line: no synopsis follows.
func (c *cli) configError(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
	return exitUsage
}

// readInput reads the file named by pos[0], or stdin when there is none or
// it is "-". It reads at most one byte more than snap.MaxMessageSize, so an
// oversized input is still reported by the parser as too large.
func (c *cli) readInput(pos []string) ([]byte, error) {
	var r io.Reader = c.stdin
	name := "standard input"
	if len(pos) > 0 && pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, pos[0]
	}
	b, err := io.ReadAll(io.LimitReader(r, snap.MaxMessageSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// signing holds the flags of a command that signs its input (sign, card
// sign): the key file, the network of the address it fills in and the
// signing time.
type signing struct {
	keyFile string
	testnet bool
	now     unixTime
}

// signingFlags declares --key, --testnet (which fills field with the
// testnet address) and --now (described by nowUse) on fs.
func signingFlags(fs *flag.FlagSet, field, nowUse string) *signing {
	s := new(signing)
	fs.StringVar(&s.keyFile, "key", "", "read the secret key from `FILE` (mode 0600); default: $SNAPNODE_KEY")
	fs.BoolVar(&s.testnet, "testnet", false, "fill "+field+" with the key's testnet (tb1p…) address")
	fs.Var(&s.now, "now", nowUse)
	return s
}

// keyAndInput parses args (at most one: the input file, else stdin),
// loads the signing key (--key FILE, else SNAPNODE_KEY) and reads the
// input; when ok is false, code is the exit code to return.
func (c *cli) keyAndInput(fs *flag.FlagSet, s *signing, args []string) (k *identity.Key, raw []byte, code int, ok bool) {
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return nil, nil, code, false
	}
	k, err := loadKey(s.keyFile)
	if errors.Is(err, identity.ErrNoKey) {
		return nil, nil, c.configError(fs, err), false
	}
	if err != nil {
		return nil, nil, c.ioError(fs.Name(), err), false
	}
	if raw, err = c.readInput(pos); err != nil {
		return nil, nil, c.ioError(fs.Name(), err), false
	}
	return k, raw, 0, true
}

func network(testnet bool) identity.Network {
	if testnet {
		return identity.Testnet
	}
	return identity.Mainnet
}

// unixTime is a flag holding Unix seconds; set reports whether it was given.
type unixTime struct {
	t   time.Time
	set bool
}

func (u *unixTime) String() string {
	if u == nil || !u.set {
		return ""
	}
	return strconv.FormatInt(u.t.Unix(), 10)
}

func (u *unixTime) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > snap.MaxTimestamp {
		return fmt.Errorf("want Unix seconds in 0…%d", int64(snap.MaxTimestamp))
	}
	u.t, u.set = time.Unix(n, 0), true
	return nil
}

// or returns the flag's time, or def when the flag was not given.
func (u *unixTime) or(def time.Time) time.Time {
	if u.set {
		return u.t
	}
	return def
}

// writeJSON prints v as one line of JSON, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSON prints v on stdout as one line of JSON (writeJSON) and
// returns 0, or reports why it could not (ioError).
func (c *cli) printJSON(prog string, v any) int {
	if err := writeJSON(c.stdout, v); err != nil {
		return c.ioError(prog, err)
	}
	return exitOK
}

// errorBody is the {"error":{…}} object printed for a SNAP error; data is
// always an object, {} when the error has none.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// fail reports err and returns 1: a *snap.Error as {"error":…} on stdout,
// anything else as a line on stderr prefixed with prog.
func (c *cli) fail(prog string, err error) int {
	var se *snap.Error
	if errors.As(err, &se) {
		data := se.Data
		if data == nil {
			data = map[string]any{}
		}
		if werr := writeJSON(c.stdout, errorBody{errorObject{int(se.Code), se.Message, data}}); werr != nil {
			fmt.Fprintf(c.stderr, "%s: %v\n", prog, werr)
		}
		return exitFail
	}
	fmt.Fprintf(c.stderr, "%s: %v\n", prog, err)
	return exitFail
}

// ioError reports an input, output or setup error on stderr and returns 2.
func (c *cli) ioError(prog string, err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", prog, err)
	return exitUsage
}
