package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// stream is `snapnode stream`: message/stream (or tasks/resubscribe) with
// the events printed as they come, then the final response.
func (c *cli) stream(args []string) int {
	fs := c.flagSet("stream")
	var cf clientFlags
	cf.define(fs, 10*time.Minute)
	taskID := fs.String("task", "", "continue the task `ID` (with --resubscribe: follow it)")
	resub := fs.Bool("resubscribe", false, "follow the task of --task from its current state (tasks/resubscribe) instead of sending a message")
	var after optionalCount
	fs.Var(&after, "after", "with --resubscribe, resume after the task `VERSION` already seen (default: replay what the agent keeps)")
	dataFile := fs.String("data", "", "send the JSON object in `FILE` as a data part")
	pos, code, done := c.parse(fs, args, -1)
	if done {
		return code
	}
	text := strings.Join(pos, " ")
	method := "message/stream"
	var payload map[string]any
	if *resub {
		switch {
		case *taskID == "":
			return c.usageError(fs, "--resubscribe needs --task ID")
		case text != "" || *dataFile != "":
			return c.usageError(fs, "--resubscribe sends no message: drop TEXT and --data")
		}
		method = "tasks/resubscribe"
		payload = map[string]any{"taskId": *taskID}
		if after.set {
			payload["afterVersion"] = after.n
		}
	} else {
		if after.set {
			return c.usageError(fs, "--after goes with --resubscribe")
		}
		var ok bool
		if payload, code, ok = c.messagePayload(fs, text, *dataFile, *taskID); !ok {
			return code
		}
		if cf.fallback {
			// The fallback sends the message again by another endpoint
			// when one failed before an event came, after the agent may
			// have taken it: one key makes one task of them, as for send.
			payload["idempotencyKey"] = snap.NewID()
		}
	}
	events := c.eventPrinter()
	if *resub {
		events = &waitNotice{eventPrinter: events, c: c, cf: cf}
	}
	return c.exchange(fs, cf, method, payload, events)
}

// waitNotice is the events of a resubscription, which says on stderr when
// its task waits for input (input_required): the stream then waits, with
// nothing to show, until the task moves on or --timeout ends it.
type waitNotice struct {
	eventPrinter
	c    *cli
	cf   clientFlags
	wait bool   // the task waits for input, as the last event said
	said string // the status note of the wait said last
}

// confirmationNote begins the status note of a task whose action waits
// for an operator (proposals.ConfirmationNote).
const confirmationNote = "confirmation needed for action "

func (w *waitNotice) event(m *snap.Message) error {
	var e struct {
		TaskID  string `json:"taskId"`
		State   string `json:"state"`
		Message string `json:"message"`
	}
	if json.Unmarshal(m.Payload, &e) == nil && e.State != "" {
		// The first event is the task's current state, and the stored
		// events replayed after it end in the same wait: one wait is
		// said once.
		w.wait = e.State == string(tasks.StateInputRequired)
		if w.wait && e.Message != w.said {
			w.say(e.TaskID, e.Message)
			w.said = e.Message
		}
	}
	return w.eventPrinter.event(m)
}

// say tells, on stderr, that task id waits for input, note its status
// note, and what moves it on.
func (w *waitNotice) say(id, note string) {
	id = printable(id)
	action, _, held := strings.Cut(strings.TrimPrefix(note, confirmationNote), ":")
	held = held && strings.HasPrefix(note, confirmationNote)
	until := fmt.Sprintf("this stream waits until the task moves on, or until --timeout %v ends it", w.cf.timeout)
	if !held {
		fmt.Fprintf(w.c.stderr, "snapnode stream: task %s waits for input (input_required): %s; answer it with: snapnode send %s --task %s TEXT\n",
			id, until, w.cf.command(), shellWord(id))
		return
	}
	action = printable(action)
	fmt.Fprintf(w.c.stderr, "snapnode stream: task %s waits for an operator's decision on action %s (input_required): %s; "+
		"on the node's machine an operator sees it with: snapnode held %s, and decides with: snapnode approve --action %s %s, or: snapnode deny --action %s %s (or in the web console, or by a signed decision)\n",
		id, action, until, shellWord(id), shellWord(action), shellWord(id), shellWord(action), shellWord(id))
}

// waiting reports whether the task waited for input when the stream
// ended.
func (w *waitNotice) waiting() bool { return w.wait }

// eventPrinter shows stream events as they arrive.
type eventPrinter interface {
	event(m *snap.Message) error
	// done ends the display before the final response is printed.
	done()
}

// eventPrinter returns a one-line progress display when stdout is a
// terminal, else JSON lines.
func (c *cli) eventPrinter() eventPrinter {
	if c.terminal {
		return &progressLine{w: c.stdout}
	}
	return jsonLines{w: c.stdout}
}

// jsonLines prints each event message as one line of JSON.
type jsonLines struct{ w io.Writer }

func (j jsonLines) event(m *snap.Message) error {
	b, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(j.w, "%s\n", b)
	return err
}

func (jsonLines) done() {}

// progressLine rewrites one terminal line with each event's summary. The
// task's id takes a line of its own, written when it first appears (or
// changes): on the progress line it would leave a step's message a few
// characters before the cut.
type progressLine struct {
	w     io.Writer
	shown bool
	task  string
}

// progressWidth bounds the progress line, to stay on one line of a narrow
// terminal.
const progressWidth = 78

func (p *progressLine) event(m *snap.Message) error {
	task, rest := eventParts(m.Payload)
	if task != "" && task != p.task {
		if p.shown {
			fmt.Fprintln(p.w)
		}
		if _, err := fmt.Fprintf(p.w, "\r\x1b[K%s\n", clipRunes(printable("task "+task), progressWidth)); err != nil {
			return err
		}
		p.task = task
	}
	p.shown = true
	_, err := fmt.Fprintf(p.w, "\r\x1b[K%s", clipRunes(printable(rest), progressWidth))
	return err
}

func (p *progressLine) done() {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

// eventSummary describes a stream event's payload in a few words: the
// task, its version and state, the progress and message, the artifact.
func eventSummary(payload []byte) string {
	task, rest := eventParts(payload)
	switch {
	case task == "":
		return rest
	case rest == "event":
		return "task " + task
	}
	return "task " + task + " · " + rest
}

// eventParts is eventSummary apart: the event's task id, and the rest
// ("event" when there is none).
func eventParts(payload []byte) (task, rest string) {
	var e struct {
		TaskID   string   `json:"taskId"`
		Version  int64    `json:"version"`
		State    string   `json:"state"`
		Current  bool     `json:"current"`
		Progress *float64 `json:"progress"`
		Message  string   `json:"message"`
		Artifact *struct {
			ArtifactID string `json:"artifactId"`
			Name       string `json:"name"`
			Partial    bool   `json:"partial"`
		} `json:"artifact"`
	}
	if json.Unmarshal(payload, &e) != nil {
		return "", "event"
	}
	var parts []string
	if e.Version > 0 {
		parts = append(parts, "v"+strconv.FormatInt(e.Version, 10))
	}
	if e.State != "" {
		s := e.State
		if e.Current {
			s += " (current)"
		}
		parts = append(parts, s)
	}
	if e.Progress != nil && *e.Progress > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100**e.Progress))
	}
	if e.Artifact != nil {
		a := "artifact " + e.Artifact.ArtifactID
		if e.Artifact.Partial {
			a += " (partial)"
		}
		parts = append(parts, a)
	}
	if e.Message != "" {
		parts = append(parts, strings.Join(strings.Fields(e.Message), " "))
	}
	if len(parts) == 0 {
		return e.TaskID, "event"
	}
	return e.TaskID, strings.Join(parts, " · ")
}

// printable drops the control characters of s: an agent's text must not
// drive the terminal (escape sequences, carriage returns).
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
}

// clipRunes shortens s to at most n characters, marking the cut with "…".
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
