package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/textcut"
	"github.com/snapnode/snapnode/tasks"
)

// job is `snapnode job list|show|history|replay`: the agent's jobs in the
// node's database.
func (c *cli) job(args []string) int {
	return c.dispatch("job", args, []subcommand{
		{"list", (*cli).jobList},
		{"show", (*cli).jobShow},
		{"history", (*cli).jobHistory},
		{"replay", (*cli).jobReplay},
		{"resume", (*cli).jobResume},
	},
		"usage: snapnode job list [--status STATUS]… [node settings]",
		"       snapnode job show [--format json|text] [node settings] ID",
		"       snapnode job history [--format json|text] [node settings] ID",
		"       snapnode job replay [node settings] ID | --file HISTORY.json",
		"       snapnode job resume --from CHECKPOINT [--data-dir DIR] ID")
}

// jobStores are what the job commands read: the job store, and the task
// store, whose status events say when a job's task waited for a human.
type jobStores struct {
	jobs  *agent.Store
	tasks taskReader
}

// openJobStores opens the job store (openJobStore) and the task store of
// the node's database.
func (c *cli) openJobStores(fs *flag.FlagSet, cfg *config.Config) (jobStores, func(), int, bool) {
	return openStore(c, fs, cfg, "jobs", func(s *node.Stores, ctx context.Context) (jobStores, error) {
		jobs, err := jobStore(ctx, s, cfg)
		if err != nil {
			return jobStores{}, err
		}
		tasks, err := s.Tasks(ctx)
		return jobStores{jobs, tasks}, err
	})
}

// openJobStore opens the agent's job store in the node's database, with
// the key of sealed history archives when agent.history_key_file is set.
func (c *cli) openJobStore(fs *flag.FlagSet, cfg *config.Config) (*agent.Store, func(), int, bool) {
	return openStore(c, fs, cfg, "jobs", func(s *node.Stores, ctx context.Context) (*agent.Store, error) {
		return jobStore(ctx, s, cfg)
	})
}

// jobStore is openJobStore's store.
func jobStore(ctx context.Context, s *node.Stores, cfg *config.Config) (*agent.Store, error) {
	st, err := s.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	key, err := cfg.HistoryKey()
	if err != nil || key == nil {
		return st, err
	}
	sealer, err := agent.NewSealer(key)
	if err != nil {
		return nil, err
	}
	st.UseKey(sealer)
	return st, nil
}

// jobCommand runs a job command that takes one job id: it parses the
// flags (--format and the node's settings), opens the job store and calls
// run with it.
func (c *cli) jobCommand(name string, args []string, run func(fs *flag.FlagSet, st jobStores, format, id string) int) int {
	fs, cfg := c.nodeFlagSet("job " + name)
	format := fs.String("format", "json", "print `json` or text")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the job's task ID")
	}
	if *format != "json" && *format != "text" {
		return c.usageError(fs, fmt.Sprintf("--format: want json or text, got %q", *format))
	}
	st, closeDB, code, ok := c.openJobStores(fs, cfg)
	if !ok {
		return code
	}
	defer closeDB()
	return run(fs, st, *format, pos[0])
}

func (c *cli) jobList(args []string) int {
	fs, cfg := c.nodeFlagSet("job list")
	var statuses []agent.Status
	fs.Func("status", "only jobs in `STATUS` (PENDING, RUNNING, SUCCESS, …; repeatable)", func(v string) error {
		for _, s := range agent.Statuses() {
			if string(s) == v {
				statuses = append(statuses, s)
				return nil
			}
		}
		return fmt.Errorf("unknown status %q (want one of %v)", v, agent.Statuses())
	})
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	st, closeDB, code, ok := c.openJobStore(fs, cfg)
	if !ok {
		return code
	}
	defer closeDB()
	jobs, err := st.List(context.Background(), 0, statuses...)
	if err != nil {
		return c.ioError(fs.Name(), err)
	}
	for _, j := range jobs {
		b, _ := json.Marshal(j.Manifest(j.Status.TaskState(), nil))
		fmt.Fprintf(c.stdout, "%s\n", b)
	}
	return exitOK
}

func (c *cli) jobShow(args []string) int {
	return c.jobCommand("show", args, c.printManifest)
}

func (c *cli) printManifest(fs *flag.FlagSet, stores jobStores, format, id string) int {
	ctx := context.Background()
	st := stores.jobs
	j, err := st.Get(ctx, id)
	if err != nil {
		return c.jobError(fs, id, err)
	}
	its, err := st.Interactions(ctx, id)
	if err != nil {
		return c.ioError("snapnode job show", err)
	}
	m := j.Manifest(j.Status.TaskState(), its)
	if format == "json" {
		b, _ := json.MarshalIndent(m, "", "  ")
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	phase := "-"
	if m.CurrentPhase != nil {
		phase = *m.CurrentPhase
	}
	fmt.Fprintf(c.stdout, "job %s: %s (task %s), phase %s\n", m.JobID, m.Status, m.TaskState, phase)
	fmt.Fprintf(c.stdout, "  %d steps, %.4g cents, %.1f s running (model calls, actions, retry back-offs: what the time limit counts), %d prompt and %d completion tokens\n",
		m.Metrics.Steps, m.Metrics.CumulativeCost, m.Metrics.CumulativeTimeSeconds, m.Metrics.PromptTokens, m.Metrics.CompletionTokens)
	ws := jobWaits(stores.tasks, id, j.Status)
	if len(ws) > 0 {
		var parts []string
		for _, who := range []string{"an operator", "the requester"} {
			var sum time.Duration
			n, open := 0, false
			for _, w := range ws {
				if w.who == who {
					sum, n = sum+w.to.Sub(w.from), n+1
					open = open || w.open
				}
			}
			switch {
			case n == 0:
			case open:
				parts = append(parts, fmt.Sprintf("waits for %s (%.1f s so far)", who, sum.Seconds()))
			default:
				parts = append(parts, fmt.Sprintf("waited %.1f s for %s", sum.Seconds(), who))
			}
		}
		fmt.Fprintf(c.stdout, "  %s; %.1f s from creation to the last update\n", strings.Join(parts, ", "), j.UpdatedAt.Sub(j.CreatedAt).Seconds())
	}
	if j.Reason != "" {
		fmt.Fprintf(c.stdout, "  %s\n", shown(j.Reason))
	}
	for i, e := range m.History {
		fmt.Fprintf(c.stdout, "  %3d %s %s %s\n", i, e.Timestamp.Format("15:04:05"), shown(e.Role), shown(e.Action))
	}
	return exitOK
}

func (c *cli) jobHistory(args []string) int {
	return c.jobCommand("history", args, c.printHistory)
}

func (c *cli) printHistory(fs *flag.FlagSet, stores jobStores, format, id string) int {
	if format == "json" {
		return c.printHistoryJSON(fs, stores.jobs, id)
	}
	// The history is read one interaction at a time (StreamHistory),
	// never whole; an interaction is printed once the next is read, the
	// waits that began before it going below it.
	w := bufio.NewWriter(c.stdout)
	var (
		ws   []wait
		prev *agent.Interaction
	)
	err := stores.jobs.StreamHistory(context.Background(), id, func(h *agent.History) error {
		fmt.Fprintf(w, "job %s (%s), created %s\n", h.JobID, h.Status, h.CreatedAt.Format("2006-01-02 15:04:05"))
		if n := h.CancelsDropped; n > 0 {
			fmt.Fprintf(w, "  %s to cancel work elsewhere (a delegate's task) dropped past the job's bound of %d: that work is not canceled by the node\n",
				cancelRecords(n), agent.MaxCancelsPerJob)
		}
		if n := h.CancelsGivenUp; n > 0 {
			fmt.Fprintf(w, "  %s to cancel work elsewhere (a delegate's task) given up after %d tries the peer did not answer: that work was not canceled by the node, and may still run\n",
				cancelRecords(n), agent.MaxCancelTries)
		}
		ws = jobWaits(stores.tasks, id, h.Status)
		return nil
	}, func(it *agent.Interaction) error {
		if prev != nil {
			ws = printStep(w, prev, it, ws)
		}
		// it is valid only during this call: the copy is printed at
		// the next (its messages, not printed, are dropped).
		cp := *it
		cp.Request.Messages = nil
		prev = &cp
		return nil
	})
	if err == nil && prev != nil {
		printStep(w, prev, nil, ws)
	}
	if err != nil {
		w.Flush()
		return c.jobError(fs, id, err)
	}
	if err := w.Flush(); err != nil {
		return c.ioError("snapnode job history", err)
	}
	return exitOK
}

// printStep prints the step it of a job's history followed by the waits
// of ws that began before next, the step after it (nil: it is the last,
// and all of ws go below it), and returns the rest of ws.
//
// The waits of the job's task (input_required) go below the call after
// which they began: the call's new status is the job's when the call
// ended, and the job stopped for a human after it.
func printStep(w io.Writer, it, next *agent.Interaction, ws []wait) []wait {
	var after []wait
	for len(ws) > 0 && (next == nil || ws[0].from.Before(next.Timestamp)) {
		after, ws = append(after, ws[0]), ws[1:]
	}
	status := it.Response.NewStatus
	if len(after) > 0 && !status.Terminal() {
		status = agent.InterventionRequired
	}
	fmt.Fprintf(w, "#%d %s %s → %s: %s %s (%.2fs)\n", it.Sequence, it.Timestamp.Format("15:04:05"),
		it.StateBefore, status, it.Response.Kind, shown(it.Response.Action), it.Response.ExecutionTimeSeconds)
	if it.Guidance != "" {
		fmt.Fprintf(w, "    told first: %s\n", shown(it.Guidance))
	}
	if it.Response.Reasoning != "" {
		// Its start: the JSON format has the whole of it.
		fmt.Fprintf(w, "    reasoning: %s\n", shown(textcut.Shorten(it.Response.Reasoning, maxReasoningShown, "…")))
	}
	if it.Response.Error != "" {
		fmt.Fprintf(w, "    error: %s\n", shown(it.Response.Error))
	}
	for _, s := range it.Response.LateLines {
		fmt.Fprintf(w, "    a late line for step %d was skipped, not run\n", s)
	}
	if o := it.Observation; o != nil {
		fmt.Fprintf(w, "    %s %s\n", o.Outcome, shown(firstLine(o.Reason)))
		if o.HeldReason != "" {
			fmt.Fprintf(w, "    held: %s\n", shown(o.HeldReason))
		}
		switch {
		case o.DecidedAt != nil && o.DecidedBy != "":
			fmt.Fprintf(w, "    decided by %s at %s\n", shown(o.DecidedBy), o.DecidedAt.Format("15:04:05"))
		case o.DecidedAt != nil:
			fmt.Fprintf(w, "    decided at %s (the audit log names who, under action %s)\n", o.DecidedAt.Format("15:04:05"), shown(o.ActionID))
		}
	}
	for _, wt := range after {
		if wt.open {
			fmt.Fprintf(w, "    waits for %s since %s (%.1f s so far): %s\n", wt.who, wt.from.Format("15:04:05"), wt.to.Sub(wt.from).Seconds(), shown(wt.note))
		} else {
			fmt.Fprintf(w, "    waited %.1f s for %s: %s\n", wt.to.Sub(wt.from).Seconds(), wt.who, shown(wt.note))
		}
	}
	return ws
}

// printHistoryJSON prints a job's history as json.MarshalIndent would
// print it whole, one interaction at a time (StreamHistory): a history
// that does not verify prints nothing, and the history printed holds
// one interaction at a time, not the whole.
func (c *cli) printHistoryJSON(fs *flag.FlagSet, st *agent.Store, id string) int {
	const prog = "snapnode job history"
	const empty = `"interactions": []`
	var (
		after []byte
		n     int
		werr  error
	)
	w := bufio.NewWriter(c.stdout)
	err := st.StreamHistory(context.Background(), id, func(h *agent.History) error {
		h.Interactions = []agent.Interaction{}
		head, err := json.MarshalIndent(h, "", "  ")
		if err != nil {
			werr = err
			return err
		}
		var before []byte
		before, after, _ = bytes.Cut(head, []byte(empty))
		w.Write(before)
		w.WriteString(empty[:len(empty)-1])
		return nil
	}, func(it *agent.Interaction) error {
		b, err := json.MarshalIndent(it, "    ", "  ")
		if err != nil {
			werr = err
			return err
		}
		if n > 0 {
			w.WriteByte(',')
		}
		w.WriteString("\n    ")
		if _, werr = w.Write(b); werr != nil {
			return werr
		}
		n++
		return nil
	})
	if werr != nil {
		return c.ioError(prog, werr)
	}
	if err != nil {
		if w.Buffered() > 0 || n > 0 {
			w.Flush()
			fmt.Fprintln(c.stdout)
		}
		return c.jobError(fs, id, err)
	}
	if n > 0 {
		w.WriteString("\n  ")
	}
	w.WriteByte(']')
	w.Write(after)
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return c.ioError(prog, err)
	}
	return exitOK
}

// cancelRecords is n followed by "record", or "records" unless n is 1.
func cancelRecords(n int64) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

// wait is a time a job's task spent in input_required, waiting for a
// human: an operator's decision on a held action, or the requester's
// guidance.
type wait struct {
	from, to time.Time
	who      string // "an operator" or "the requester"
	note     string // the task's status note
	open     bool   // it still waits: to is now
}

// jobWaits reads the waits of the job's task from its status events;
// none when the task store has no events for it (a job's history read
// from another database).
func jobWaits(st taskReader, id string, status agent.Status) []wait {
	events, err := st.Events(context.Background(), id, 0)
	if err != nil {
		return nil
	}
	var (
		ws  []wait
		cur *wait
	)
	for _, e := range events {
		if e.Status == nil {
			continue
		}
		if cur != nil {
			cur.to = e.Status.Timestamp
			ws, cur = append(ws, *cur), nil
		}
		if e.Status.State == tasks.StateInputRequired {
			who := "the requester"
			if strings.HasPrefix(e.Status.Message, "confirmation needed for action ") {
				who = "an operator"
			}
			cur = &wait{from: e.Status.Timestamp, who: who, note: e.Status.Message}
		}
	}
	if cur != nil && status == agent.InterventionRequired {
		cur.to, cur.open = time.Now(), true
		ws = append(ws, *cur)
	}
	return ws
}

func (c *cli) jobReplay(args []string) int {
	fs, cfg := c.nodeFlagSet("job replay")
	file := fs.String("file", "", "replay the history in `FILE` (as job history printed it) instead of the database's")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	// The history is read one interaction at a time, never whole: a long
	// job's replays in bounded memory.
	var (
		id  string
		err error
	)
	r := agent.NewReplayer(cfg.Agent.MaxAnswerBytes)
	switch {
	case *file != "" && len(pos) == 0:
		f, ferr := os.Open(*file)
		if ferr != nil {
			return c.ioError(fs.Name(), ferr)
		}
		defer f.Close()
		id, err = agent.ReplayJSON(bufio.NewReader(f), r)
		var re *agent.ReplayError
		if err != nil && !errors.As(err, &re) {
			fmt.Fprintf(c.stderr, "%s: %s: %v\n", fs.Name(), *file, err)
			return exitFail
		}
	case *file == "" && len(pos) == 1:
		st, closeDB, code, ok := c.openJobStore(fs, cfg)
		if !ok {
			return code
		}
		defer closeDB()
		id = pos[0]
		err = st.ReplayJob(context.Background(), id, r)
		var re *agent.ReplayError
		if err != nil && !errors.As(err, &re) {
			return c.jobError(fs, id, err)
		}
	default:
		return c.usageError(fs, "give the job's task ID or --file, not both")
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: job %s: %v\n", fs.Name(), id, err)
		return exitFail
	}
	fmt.Fprintf(c.stdout, "job %s: %d interactions replayed, consistent", id, r.N())
	if n := r.Unhashed(); n > 0 {
		// Accepted, as older builds wrote them; but an edit of their
		// messages cannot show.
		fmt.Fprintf(c.stdout, "; %d carry no messages_sha256 (written by an older build): their messages were not checked", n)
	}
	fmt.Fprintln(c.stdout)
	return exitOK
}

// jobError reports err of the job command fs on the job of task id; the
// list it names is the command as this one was given the node
// (nodeCommand: the bare one finds no node of another data folder).
func (c *cli) jobError(fs *flag.FlagSet, id string, err error) int {
	prog := fs.Name()
	if errors.Is(err, agent.ErrForgotten) {
		fmt.Fprintf(c.stderr, "%s: the agent job of task %s was forgotten, with its history, after its task was deleted\n", prog, shellWord(id))
		return exitFail
	}
	if errors.Is(err, agent.ErrNoJob) {
		fmt.Fprintf(c.stderr, "%s: task %s is not an agent job in this database (snapnode job list %sshows them)\n", prog, shellWord(id), nodeCommand(fs))
		return exitFail
	}
	if errors.Is(err, agent.ErrArchiveTampered) || errors.Is(err, agent.ErrArchiveSealed) || errors.Is(err, agent.ErrHistoryMismatch) {
		// The history is there but does not verify, or is sealed: not
		// an I/O failure, an inconsistency (replay's exit 1).
		fmt.Fprintf(c.stderr, "%s: %v\n", prog, err)
		return exitFail
	}
	return c.ioError(prog, err)
}

// maxReasoningShown bounds the start of a step's reasoning that the text
// format of a job's history shows, in bytes.
const maxReasoningShown = 300

// shown is text a model or a peer wrote (an action's name, an error, a
// reason) as one line of the text formats: every control and invisible
// character spelled out (⟨U+001B⟩), newlines too, as the console and
// `held --diff` show them, so that it can neither drive the operator's
// terminal nor forge a line of the listing.
func shown(s string) string {
	return strings.ReplaceAll(executor.Visible(s), "\n", "⟨U+000A⟩")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// jobResume is `snapnode job resume --from CHECKPOINT ID`: the running
// node restarts the job from one of its recovery points.
func (c *cli) jobResume(args []string) int {
	fs, cfg := c.nodeFlagSet("job resume")
	from := fs.String("from", "", "the `CHECKPOINT` id to restart from")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the job's task ID")
	}
	if *from == "" {
		return c.usageError(fs, "--from: give the checkpoint to resume from")
	}
	res, code, ok := c.callAdmin(fs, cfg, admin.Request{Op: "job-resume", Task: pos[0], Checkpoint: *from}, 2*time.Minute, nil)
	if !ok {
		return code
	}
	fmt.Fprintf(c.stdout, "%s\n", res)
	return exitOK
}
