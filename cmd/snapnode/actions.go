package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/scripts"
	"github.com/snapnode/snapnode/proposals"
)

// adminCommand is `snapnode approve|deny TASK` and `snapnode rollback
// ACTION`: one request to the running node's admin socket.
func (c *cli) adminCommand(op string, args []string) int {
	what := "TASK_ID"
	if op == "rollback" {
		what = "ACTION_ID"
	}
	fs, cfg := c.nodeFlagSet(op)
	reason, action, diff := "", "", ""
	if op == "deny" {
		fs.StringVar(&reason, "reason", "", "fail the task with the note `TEXT` (told to the agent, for an agent's job)")
	}
	if op == "approve" {
		fs.StringVar(&diff, "diff", "", "approve only if the action's diff is still the one of `SHA256` (as `snapnode held` lists it)")
	}
	if op != "rollback" {
		fs.StringVar(&action, "action", "", "decide on the held action `ID` (needed when the task holds several)")
	}
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the "+what)
	}
	if diff = strings.ToLower(diff); diff != "" && !proposals.ValidDiffSum(diff) {
		return c.usageError(fs, "--diff takes the 64 hex digits of the SHA-256 that `snapnode held` lists")
	}
	req := admin.Request{Op: op, Task: pos[0], Action: action, Reason: reason, Diff: diff}
	if op == "rollback" {
		req = admin.Request{Op: op, Action: pos[0]}
	}
	var refused func()
	if op != "rollback" {
		// What the node said names the task's state or the actions it
		// holds; where to look, with the flags that found the node:
		refused = func() {
			fmt.Fprintf(c.stderr, "see snapnode held %s(the actions waiting for a decision) and snapnode task show %s%s (the task)\n",
				nodeCommand(fs), nodeCommand(fs), shellWord(pos[0]))
		}
	}
	res, code, ok := c.callAdmin(fs, cfg, req, 2*time.Minute, refused)
	if !ok {
		return code
	}
	fmt.Fprintf(c.stdout, "%s\n", res)
	if c.terminal && op != "rollback" {
		c.taskSummary(res, func(id string, _ bool) string {
			return "read it again: snapnode task show " + nodeCommand(fs) + shellWord(id)
		})
	}
	return exitOK
}

// nodeCommand is the flags of fs given that name the node's data folder
// and database (--config, --data-dir, --database), as a command line
// gives them, each followed by a space: a command that reads the node's
// database finds it where this one was told it is. A PostgreSQL DSN's
// passwords are shown as xxxxx (node.ShowDatabase), as the console shows
// them: stderr is no place for them, and the operator puts them back.
func nodeCommand(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "config", "data-dir":
			b.WriteString("--" + f.Name + " " + shellWord(f.Value.String()) + " ")
		case "database":
			b.WriteString("--database " + shellWord(node.ShowDatabase(f.Value.String())) + " ")
		}
	})
	return b.String()
}

// callAdmin loads the settings (they name the data folder) and sends req
// to the running node's admin socket, waiting up to timeout for the
// answer; when ok is false the error is reported and code is the exit
// code to return. When the node refused the request, refused, if not nil,
// is called after the error is reported.
func (c *cli) callAdmin(fs *flag.FlagSet, cfg *config.Config, req admin.Request, timeout time.Duration, refused func()) (res json.RawMessage, code int, ok bool) {
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return nil, c.configError(fs, err), false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := admin.Call(ctx, admin.Path(cfg.DataDir), req)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", fs.Name(), err)
		var r *admin.RefusedError
		if refused != nil && errors.As(err, &r) {
			refused()
		}
		return nil, exitFail, false
	}
	return res, exitOK, true
}

// held is `snapnode held [--diff] [--after ACTION] [--limit N] [TASK]`:
// the actions the running node's tasks hold for a decision (TASK's only,
// when given), oldest first, one a line with the id approve and deny take
// with --action and the sum of the diff approve takes with --diff; with
// --diff, each diff below its line. When more are held than listed, it
// says how many on stderr, and the --after that lists the next page.
func (c *cli) held(args []string) int {
	fs, cfg := c.nodeFlagSet("held")
	showDiff := fs.Bool("diff", false, "print each action's diff below its line")
	after := fs.String("after", "", "list the actions held after `ACTION` (the next page)")
	limit := fs.Int("limit", 0, "list at most `N` actions (0: the node's bound, 1000)")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) > 1 {
		return c.usageError(fs, "give at most one TASK_ID")
	}
	if *limit < 0 {
		return c.usageError(fs, "--limit must be 0 or more")
	}
	req := admin.Request{Op: "held", WithDiff: *showDiff, After: *after, Limit: *limit}
	if len(pos) == 1 {
		req.Task = pos[0]
	}
	// A page of diffs may carry up to 64 MiB, spelled out by the node: on
	// a busy machine that takes longer than a list of sums.
	wait := 30 * time.Second
	if *showDiff {
		wait = 2 * time.Minute
	}
	res, code, ok := c.callAdmin(fs, cfg, req, wait, nil)
	if !ok {
		return code
	}
	var page heldPage
	if err := json.Unmarshal(res, &page); err != nil {
		// A node of an earlier version answers the list alone.
		if err := json.Unmarshal(res, &page.Actions); err != nil {
			fmt.Fprintf(c.stderr, "snapnode held: the node answered %s\n", res)
			return exitFail
		}
		page.Total = len(page.Actions)
	}
	list := page.Actions
	if len(list) == 0 && page.Total == 0 {
		fmt.Fprintln(c.stderr, "no action waits for a decision")
	}
	if page.Next != "" || len(list) < page.Total {
		next := ""
		if page.Next != "" {
			// The command as this one was given, from the page's end:
			// the flags that name the node (the bare command finds no
			// node run with another data folder), the page's size and
			// --diff.
			next = "; the next page: snapnode held " + nodeCommand(fs)
			if *limit > 0 {
				next += "--limit " + strconv.Itoa(*limit) + " "
			}
			if *showDiff {
				next += "--diff "
			}
			next += "--after " + shellWord(page.Next)
			if req.Task != "" {
				next += " " + shellWord(req.Task)
			}
		}
		bounded := ""
		if page.DiffsBounded {
			bounded = " (the page ended where its diffs filled one answer of the node)"
		}
		fmt.Fprintf(c.stderr, "listed %d of the %d actions held%s%s\n", len(list), page.Total, bounded, next)
	}
	if c.terminal {
		printHeldTable(c.stdout, list, *showDiff)
		return exitOK
	}
	for _, h := range list {
		fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Task, h.Action, h.Kind, h.Requester, mixed(h.Reason), h.DiffSum)
		if *showDiff {
			printDiff(c.stdout, h.Diff, h.DiffCut)
		}
	}
	return exitOK
}

// heldPage is the node's answer to held: a page of the actions, how many
// are held in all, and the action the next page starts after.
type heldPage struct {
	Actions []heldAction
	Total   int
	Next    string
	// DiffsBounded: the page ended before its limit, where the diffs
	// the node reads or sends for one answer were spent.
	DiffsBounded bool `json:"diffs_bounded"`
}

// heldAction is one action of the node's answer to held.
type heldAction struct {
	Task, Action, Kind, Requester, Reason, Diff string
	DiffSum                                     string `json:"diff_sha256"`
	// DiffCut counts the bytes of a diff too long for one answer of the
	// node left out of Diff.
	DiffCut int `json:"diff_cut"`
}

// printHeldTable prints the held actions for a reader at a terminal:
// aligned columns under a header, the reason last (it is the longest);
// with showDiff, each action is a table of its own with its diff below.
// A pipe gets the tab-separated lines of held instead.
func printHeldTable(w io.Writer, list []heldAction, showDiff bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, h := range list {
		if i == 0 || showDiff {
			fmt.Fprintln(tw, "TASK\tACTION\tKIND\tREQUESTER\tDIFF SHA-256\tREASON")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(h.Task), cell(h.Action), cell(h.Kind), cell(h.Requester), cell(h.DiffSum), cell(mixed(h.Reason)))
		if showDiff {
			tw.Flush()
			printDiff(w, h.Diff, h.DiffCut)
			if i < len(list)-1 {
				fmt.Fprintln(w)
			}
		}
	}
	tw.Flush()
}

// cell is a table cell: text shown on one line without tabs, "-" when
// there is none.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(shown(s), "\t", " ")
}

// mixed marks, in a held action's reason, the words that mix scripts or
// are wholly of look-alikes of Latin letters (internal/scripts): the
// paths it names, a look-alike letter of one ("pаssword.txt", its а
// Cyrillic; "ѕсоре.txt", all Cyrillic) spelled out, ⟨U+0430 Cyrillic⟩.
func mixed(reason string) string { return scripts.Mark(reason, scripts.Spelled) }

// printDiff prints a held action's diff, ending its last line, the words
// of its paths that can pass for Latin ones marked (executor.MarkDiffPaths),
// and, when the node cut it (cut bytes left out), a line saying so.
func printDiff(w io.Writer, diff string, cut int) {
	diff = executor.MarkDiffPaths(diff)
	fmt.Fprint(w, diff)
	if !strings.HasSuffix(diff, "\n") {
		fmt.Fprintln(w)
	}
	if cut > 0 {
		fmt.Fprintf(w, "[%d more bytes of this diff not shown: it is too long for one answer of the node; the console's task page downloads it whole]\n", cut)
	}
}

func (c *cli) approve(args []string) int  { return c.adminCommand("approve", args) }
func (c *cli) deny(args []string) int     { return c.adminCommand("deny", args) }
func (c *cli) rollback(args []string) int { return c.adminCommand("rollback", args) }

// consoleURL is `snapnode console-url`: the running node, asked through
// its admin socket, issues a one-time login link to its web console, for
// a browser of the user who runs the command (under sudo, of the user
// who ran sudo), of the one --user names, or of any client (--user any).
func (c *cli) consoleURL(args []string) int {
	fs, cfg := c.nodeFlagSet("console-url")
	name := fs.String("user", "", "the local `USER` (a name or a uid) whose browser opens the link, or \"any\" for any client (a reverse proxy); default: who runs the command, under sudo who ran sudo")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	user, err := linkUser(*name, os.Getenv("SUDO_UID"))
	if err != nil {
		fmt.Fprintf(c.stderr, "snapnode console-url: %v\n", err)
		return exitUsage
	}
	res, code, ok := c.callAdmin(fs, cfg, admin.Request{Op: "console-url", User: user}, 30*time.Second, nil)
	if !ok {
		return code
	}
	var login struct {
		URL     string    `json:"url"`
		Expires time.Time `json:"expires"`
		UID     *int      `json:"uid"`
	}
	if err := json.Unmarshal(res, &login); err != nil || login.URL == "" {
		fmt.Fprintf(c.stderr, "snapnode console-url: the node answered %s\n", res)
		return exitFail
	}
	fmt.Fprintln(c.stdout, login.URL)
	who := ""
	if login.UID != nil {
		who = " as " + userName(*login.UID)
	}
	fmt.Fprintf(c.stderr, "open it in a browser on this machine%s before %s; it works once\n", who, login.Expires.Local().Format("15:04:05"))
	return exitOK
}

// linkUser is the user console-url asks a link for (admin.Request.User):
// the one name names (a user name, a uid, or "any"), else sudoUID (the
// user who ran sudo, when it did), else "", the command's own.
func linkUser(name, sudoUID string) (string, error) {
	switch {
	case name == "any":
		return name, nil
	case name == "":
		if _, err := strconv.ParseUint(sudoUID, 10, 31); err == nil {
			return sudoUID, nil
		}
		return "", nil
	}
	if _, err := strconv.ParseUint(name, 10, 31); err == nil {
		return name, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("--user %s: %w", name, err)
	}
	return u.Uid, nil
}

// userName names the local user uid: its name and uid, or its uid alone.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("user %s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// audit is `snapnode audit verify|export`.
func (c *cli) audit(args []string) int {
	sub := func(name string) func(*cli, []string) int {
		return func(c *cli, args []string) int { return c.auditSub(name, args) }
	}
	return c.dispatch("audit", args, []subcommand{{"verify", sub("verify")}, {"export", sub("export")}},
		"usage: snapnode audit verify [--file FILE] [--anchor SEQ:HASH]... [--address ADDR] [node settings]",
		"       snapnode audit export [--from SEQ] [node settings] > audit.jsonl")
}

// auditSub is `snapnode audit verify` or `snapnode audit export` (sub).
func (c *cli) auditSub(sub string, args []string) int {
	fs, cfg := c.nodeFlagSet("audit " + sub)
	file := ""
	var from int64
	var anchors []audit.Anchor
	address := ""
	if sub == "verify" {
		fs.Func("address", "accept only seals and checkpoints signed by `ADDR`, the node's address (default: the node's key, when found)", func(v string) error {
			if _, err := identity.ParseAddress(v); err != nil {
				return fmt.Errorf("%q is not an address: %w", v, err)
			}
			address = v
			return nil
		})
		fs.StringVar(&file, "file", "", "verify the export in `FILE` (- for standard input) instead of the database")
		fs.Func("anchor", "also check that entry SEQ still has hash HASH (`SEQ:HASH`, a head an earlier audit verify printed, kept off the machine); repeatable", func(v string) error {
			a, err := parseAnchor(v)
			anchors = append(anchors, a)
			return err
		})
	} else {
		fs.Int64Var(&from, "from", 0, "start at entry `SEQ`")
	}
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	ctx := context.Background()
	if file != "" {
		var r io.Reader = c.stdin
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return c.ioError("snapnode audit verify", err)
			}
			defer f.Close()
			r = f
		}
		rep, err := audit.VerifyJSONLWith(r, audit.VerifyOptions{Anchors: anchors, Signer: address})
		noKey := "an export names its own"
		if address != "" {
			noKey = ""
		}
		return c.auditReport(rep, err, noKey)
	}
	log, closeLog, code, ok := c.openAudit(fs, cfg)
	if !ok {
		return code
	}
	defer closeLog()
	if sub == "export" {
		if err := log.Export(ctx, c.stdout, from); err != nil {
			return c.ioError("snapnode audit export", err)
		}
		return exitOK
	}
	key, err := node.ExistingKey(*cfg)
	if err != nil {
		return c.ioError("snapnode audit verify", err)
	}
	keyHeld := "no key found"
	if key != nil || address != "" {
		keyHeld = ""
	}
	// Checked against the node's record of its last seal, kept in its
	// data folder, as the console checks it.
	record := cfg.SealRecordPath()
	rep, err := log.VerifyWithRecord(ctx, audit.VerifyOptions{Anchors: anchors, Signer: address}, record)
	var unread *audit.RecordError
	if errors.As(err, &unread) {
		// Not evidence of tampering: the chain was verified without the
		// record, and is reported as it is; the check is not complete,
		// exit 2 unless the chain does not hold.
		fmt.Fprintf(c.stdout, "record of the last seal (%s) cannot be read: %v\n", record, unread.Record)
		fmt.Fprintf(c.stdout, "that is not evidence that the log was changed, but the chain is not checked against the record: check the file's owner and permissions (the node's user must read it; the node writes it 0600), that it is a regular file and that the disk reads, or restore it from a backup (`snapnode backup` copies it as audit-seal.json); if it is lost, move it aside, keeping it: the node's next seal writes another\n")
		if code := c.auditReport(rep, unread.Chain, keyHeld); code != exitOK {
			return code
		}
		fmt.Fprintf(c.stdout, "the chain verified, not checked against the record of the last seal\n")
		return exitUsage
	}
	code = c.auditReport(rep, err, keyHeld)
	if code == exitOK {
		switch rec := rep.SealRecord; {
		case rec.Seq == 0:
			fmt.Fprintf(c.stdout, "no record of the last seal at %s: a node that has not sealed since it keeps one, or another data folder\n", record)
		case rep.SealRecordChecked:
			fmt.Fprintf(c.stdout, "record of the last seal (%s): entry %d, held by the chain\n", record, rec.Seq)
		default:
			fmt.Fprintf(c.stdout, "record of the last seal (%s): entry %d, before the retained chain (pruned behind the checkpoint: not checkable)\n", record, rec.Seq)
		}
	}
	return code
}

// parseAnchor reads --anchor's SEQ:HASH.
func parseAnchor(v string) (audit.Anchor, error) {
	seq, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 0 || len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return audit.Anchor{}, fmt.Errorf("%q is not SEQ:HASH (an entry's seq and its 64 lowercase hex digits)", v)
	}
	return audit.Anchor{Seq: n, Hash: hash}, nil
}

// openAudit opens the audit log of the node's database (openStore).
func (c *cli) openAudit(fs *flag.FlagSet, cfg *config.Config) (*audit.Log, func(), int, bool) {
	return openStore(c, fs, cfg, "audit log", (*node.Stores).Audit)
}

// auditReport prints the outcome of a verification: exit 0 when the chain
// holds, 1 with the first bad entry named when it does not; and what was
// not checked: a partial export's start, a checkpoint's or seal's signer
// when neither the node's key nor --address was there to compare it with
// (noKey says why, "" when they were), and the entries no seal covers.
func (c *cli) auditReport(rep audit.Report, err error, noKey string) int {
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve) && errors.Is(err, audit.ErrOtherKey):
		// Not a chain rewritten by someone without the key: seals (or a
		// checkpoint) another key signed, which the log alone cannot
		// tell from another node's log put in its place.
		fmt.Fprintf(c.stdout, "audit log signed by another key: %v\n", ve)
		fmt.Fprintf(c.stdout, "entries verified before it: %d\n", rep.Entries)
		fmt.Fprintf(c.stdout, "%s's signature holds; the key expected is %s's: the node's key changed since %s signed (start the node with that key again), or this log is another node's. `snapnode audit verify --address %s` checks the log against that key\n",
			ve.Signer, ve.Want, ve.Signer, ve.Signer)
		return exitFail
	case errors.As(err, &ve):
		fmt.Fprintf(c.stdout, "audit log TAMPERED: %v\n", ve)
		fmt.Fprintf(c.stdout, "entries verified before it: %d\n", rep.Entries)
		return exitFail
	case err != nil:
		fmt.Fprintf(c.stderr, "snapnode audit verify: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(c.stdout, "audit log intact: %d entries (seq %d–%d); head seq %d hash %s\n",
		rep.Entries, rep.First, rep.Last, rep.Head.Seq, rep.Head.Hash)
	if rep.AnchorsChecked+rep.AnchorsPruned > 0 {
		fmt.Fprintf(c.stdout, "%d anchors checked, %d before the retained chain (not checkable)\n", rep.AnchorsChecked, rep.AnchorsPruned)
	}
	if rep.Partial {
		first := rep.First
		if rep.Entries == 0 {
			first = rep.Head.Seq + 1
		}
		fmt.Fprintf(c.stdout, "partial export: it starts at entry %d; its link to entry %d, and the entries before, were not checked (unless an anchor of entry %d was given)\n",
			first, first-1, first-1)
	} else if rep.Checkpoint.Seq > 0 {
		signed := "unsigned"
		if rep.CheckpointSigner != "" {
			signed = "signed by " + rep.CheckpointSigner
		}
		if noKey != "" {
			signed += ", a signer not compared with the node's key (" + noKey + "): compare it with the node's address, or give that with --address"
		}
		fmt.Fprintf(c.stdout, "pruned up to seq %d; checkpoint hash %s, %s\n", rep.Checkpoint.Seq, rep.Checkpoint.Hash, signed)
	}
	st := audit.SealStatusOf(rep, nil)
	if st.Seals == 0 {
		fmt.Fprintf(c.stdout, "no seal: the %d entries are unsealed (no signature vouches for them: they can be rewritten unseen)\n", st.Unsealed)
		return exitOK
	}
	s := st.Last
	signed := "signed by " + s.Signer
	if noKey != "" {
		signed += ", a signer not compared with the node's key (" + noKey + "): compare it with the node's address, or give that with --address"
	}
	seals := "seals"
	if st.Seals == 1 {
		seals = "seal"
	}
	fmt.Fprintf(c.stdout, "%d %s, the last at entry %d (head seq %d hash %s, %s), %s; %d entries after it are unsealed\n",
		st.Seals, seals, s.Seq, s.Head.Seq, s.Head.Hash, s.Time.Format(time.RFC3339), signed, st.Unsealed)
	return exitOK
}
