package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/scripts"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	},
	"parts": partsText,
	"json":  prettyJSON,
	// visible shows every invisible character of a text from a peer,
	// a model or a file (executor.Visible): what an operator reads is
	// what is there, a diff's CR or bidi override included. It is for
	// short texts (an action's name); a longer one is shown by one of
	// the funcs below, which bound it as shown.
	"visible": executor.Visible,
	// mixed, clipMixed, reasoning, clip and stepDiff show a text as
	// visible does, cut to a bound: a character spelled out takes up to
	// twelve times its bytes (⟨U+0001⟩ for one), so a text is spelled out
	// within its bound (showCut, showDiffCut), not cut and then spelled
	// out. All but clip also mark the words that mix scripts or are
	// wholly of look-alikes of Latin letters (internal/scripts): a
	// look-alike letter in a path ("pаssword.txt", its а Cyrillic;
	// "ѕсоре", all Cyrillic) is spelled out, ⟨U+0430 Cyrillic⟩; stepDiff
	// those of a diff's file headers alone (executor.MarkDiffPaths, as
	// the held action's diff is), the others every word of a text (the
	// host's, naming paths, as a held action's reason, or a model's).
	// mixed bounds a text of the node's words to MaxStepText, clipMixed
	// and clip a text of the agent's job (what the model was told, a
	// requester's follow-ups among it: up to a MiB; its answer's words, a
	// worker's), and stepDiff the diff of one of its steps (of files of
	// up to a MiB), to MaxStepText: the page shows up to MaxSteps steps;
	// reasoning bounds a step's reasoning to agent.MaxReasoningBytes.
	"mixed": func(s string) string {
		return showCut(s, MaxStepText, true, "more bytes not shown")
	},
	"clipMixed": func(s, whole string) string {
		return showCut(s, MaxStepText, true, "more bytes not shown: "+whole+" prints it whole")
	},
	"reasoning": func(s, whole string) string {
		return showCut(s, agent.MaxReasoningBytes, true, "more bytes not shown: "+whole+" prints it whole")
	},
	"clip": func(s, whole string) string {
		return showCut(s, MaxStepText, false, "more bytes not shown: "+whole+" prints it whole")
	},
	"stepDiff": func(d, whole string) string {
		shown, _ := showDiffCut(d, MaxStepText, "more bytes of the diff not shown: "+whole+" prints it whole")
		return shown
	},
	// step is a step with the command that prints the job's history
	// whole, for the reasoning template (a template is given one value).
	"step": func(it agent.Interaction, whole string) stepView {
		return stepView{Interaction: it, Whole: whole}
	},
}

// stepView is a step of the agent's job as the reasoning template shows
// it: Whole is the command that prints the job's history whole.
type stepView struct {
	agent.Interaction
	Whole string
}

// page is what every page's layout needs.
type page struct {
	Title string
	Nav   string // the current section: tasks, audit, metrics
	// Home is the session's prefix (session.home), which every link and
	// form of its pages is under; "" when logged out.
	Home    string
	CSRF    string // "" when logged out
	Refresh int    // seconds between reloads; 0: none
	Data    any
}

// render writes page name with status.
func (c *Console) render(w http.ResponseWriter, status int, name string, p page) {
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, p); err != nil {
		c.cfg.Logger.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// message renders a page of one message (errors, login, logout).
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	c.render(w, status, "message", page{Title: title, Data: text})
}

// failed reports err of the node on a page: 404 for a missing task.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, tasks.ErrNotFound) {
		c.message(w, r, http.StatusNotFound, "Not found", what+": no such task.")
		return
	}
	c.cfg.Logger.Error("console: "+what, "err", err)
	c.message(w, r, http.StatusInternalServerError, "Error", what+": "+err.Error())
}

// taskRow is one line of the task list.
type taskRow struct {
	ID, Owner, Message string
	State              tasks.State
	Created, Updated   time.Time
}

type taskListData struct {
	States    []tasks.State
	State     string
	Requester string
	Rows      []taskRow
	Truncated bool
}

// taskList is GET <home>?state=…&requester=…: the newest tasks first.
func (c *Console) taskList(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := taskListData{States: tasks.States(), State: q.Get("state"), Requester: strings.TrimSpace(q.Get("requester"))}
	// Brief: a line a task, its history and artifacts are not read.
	f := tasks.Filter{Owner: d.Requester, Limit: MaxTasks + 1, Newest: true, Brief: true}
	if d.State != "" {
		if !tasks.State(d.State).Valid() {
			c.message(w, r, http.StatusBadRequest, "Bad filter", fmt.Sprintf("state %q: want one of %v", d.State, tasks.States()))
			return
		}
		f.States = []tasks.State{tasks.State(d.State)}
	}
	list, err := c.cfg.Source.Tasks(r.Context(), f)
	if err != nil {
		c.failed(w, r, "listing the tasks", err)
		return
	}
	if len(list) > MaxTasks {
		list, d.Truncated = list[1:], true // the oldest is past the bound
	}
	slices.Reverse(list) // newest first
	for _, t := range list {
		d.Rows = append(d.Rows, taskRow{ID: t.ID, Owner: t.Owner, State: t.Status.State, Message: t.Status.Message,
			Created: t.CreatedAt, Updated: t.Status.Timestamp})
	}
	c.render(w, http.StatusOK, "tasks", page{Title: "Tasks", Nav: "tasks", Home: s.home(), CSRF: s.csrf, Refresh: 5, Data: d})
}

// heldView is one held action as the task page shows it.
type heldView struct {
	executor.Pending
	Risk       string
	Descriptor string
	// DiffSum names the diff shown, for the approval (Decision.Diff),
	// DiffSize its length in bytes and DiffURL the link that downloads
	// it whole (diffFile). Diff is as shown: its paths marked
	// (executor.MarkDiffPaths), cut to MaxDiffText bytes so marked. Cut is set when
	// the page shows only the first Shown bytes of the diff.
	DiffSum  string
	DiffSize int
	DiffURL  string
	Cut      bool
	Shown    int
	// Files are the paths the action changes (its pre-images): the ones
	// past a cut diff too, up to MaxPartText bytes of them as shown
	// (showPaths); LaterFiles counts those left out, after them.
	Files      []fileView
	LaterFiles int
	// Step is the agent's step that proposed the action (the one whose
	// observation names it, as the runtime settles a decision on it),
	// nil for an action a peer proposed: the page shows that step's
	// reasoning beside the action.
	Step *agent.Interaction
}

// fileView is a path a held action changes, as the task page shows it:
// every invisible character shown, the letters beyond ASCII of a word
// that can pass for a Latin word it is not (internal/scripts: it mixes
// scripts, or is wholly of look-alikes of Latin letters) spelled out,
// LookAlike set then (a badge says so).
type fileView struct {
	Path      string
	LookAlike bool
}

type taskData struct {
	Task *tasks.Task
	// Held are the oldest MaxHeld actions the task holds; LaterHeld
	// counts those left out, after them.
	Held      []heldView
	LaterHeld int
	Job       *agent.Job
	Steps     []agent.Interaction
	// EarlierSteps counts the steps left out, before Steps.
	EarlierSteps int
	// Messages are the newest MaxMessages of the task's history;
	// EarlierMessages counts those left out, before them.
	Messages        []tasks.Message
	EarlierMessages int
	Audit           []audit.Entry
	// EarlierAudit counts the task's audit entries left out, before Audit.
	EarlierAudit int
	Notice       string
	Error        string
	Terminal     bool
	// The commands the page's hints name, as this node is named
	// (command): the actions the task holds, their diffs whole, the
	// agent job's history whole and the audit log whole.
	HeldCommand, DiffCommand, HistoryCommand, ExportCommand string
}

// task is GET <home>tasks/{id}.
func (c *Console) task(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderTask(w, r, s, http.StatusOK, r.URL.Query().Get("done"), "")
}

// renderTask renders the task page with a notice or an error.
func (c *Console) renderTask(w http.ResponseWriter, r *http.Request, s *session, status int, notice, errText string) {
	ctx := r.Context()
	id := r.PathValue("id")
	t, err := c.cfg.Source.Task(ctx, id)
	if err != nil {
		c.failed(w, r, "task "+id, err)
		return
	}
	d := taskData{Task: t, Terminal: t.Status.State.Terminal(), Error: errText, Messages: t.History,
		HeldCommand:    c.command("held", id),
		DiffCommand:    c.command("held", "--diff", id),
		HistoryCommand: c.command("job history", id),
		ExportCommand:  c.command("audit export"),
	}
	if n := len(d.Messages); n > MaxMessages {
		d.Messages, d.EarlierMessages = d.Messages[n-MaxMessages:], n-MaxMessages
	}
	switch notice {
	case "approved", "denied":
		d.Notice = "The action was " + notice + "."
	case "held-again":
		d.Notice = "The files changed since the diff was shown: nothing ran, and the action waits again with the new diff below."
	case "failed":
		d.Notice = "The action was approved, but it failed: see the audit trail below."
		if why, ok := c.failure(ctx, id, r.URL.Query().Get("action")); ok {
			d.Notice = "The action was approved, but it failed: " + showCut(why, MaxStepText, true, "more bytes not shown")
		}
	}
	// Each shown action costs a read of its audit entries and a diff on
	// the page; a task may hold many more.
	heldPage, err := c.cfg.Source.HeldPage(ctx, proposals.HeldQuery{Task: id, Limit: MaxHeld})
	if err != nil {
		c.failed(w, r, "the actions task "+id+" holds", err)
		return
	}
	held := heldPage.Actions
	d.LaterHeld = max(heldPage.Total-len(held), 0)
	if d.Audit, d.EarlierAudit, err = c.newestAudit(ctx, id); err != nil {
		c.failed(w, r, "the audit entries of task "+id, err)
		return
	}
	for _, p := range held {
		// The action's own entries: a task's trail can be longer than
		// the page shows, its validation among the left-out ones.
		entries, err := c.cfg.Source.Audit(ctx, audit.Filter{Task: id, Action: p.ActionID, Limit: MaxAuditEntries})
		if err != nil {
			c.failed(w, r, "the audit entries of action "+p.ActionID, err)
			return
		}
		v := heldView{Pending: p, Risk: riskOf(entries, p.ActionID), Descriptor: showCut(indented(p.Data), MaxPartText, false, "more bytes not shown"),
			DiffSum: proposals.DiffSum(p.Diff), DiffSize: len(p.Diff)}
		v.DiffURL = s.home() + "tasks/" + url.PathEscape(id) + "/held/" + url.PathEscape(p.ActionID) + "/diff?sum=" + v.DiffSum
		// The sum is the whole diff's: the page shows its start, and
		// says so next to Approve, with the link to the rest.
		v.Diff, v.Shown = showDiffCut(p.Diff, MaxDiffText, "more bytes of the diff not shown: download it whole, or "+d.DiffCommand+" prints it")
		v.Cut = v.Shown < len(p.Diff)
		v.Files, v.LaterFiles = showPaths(p.PreImages)
		d.Held = append(d.Held, v)
	}
	// The newest steps alone are read: a job's history can hold
	// thousands.
	if d.Job, d.Steps, err = c.cfg.Source.Job(ctx, id, MaxSteps); err != nil {
		c.failed(w, r, "the agent's job on task "+id, err)
		return
	}
	for i := range d.Held {
		if d.Held[i].Step = proposer(d.Steps, d.Held[i].ActionID); d.Held[i].Step == nil && d.Job != nil {
			// Proposed before the steps shown: looked up by its id.
			if d.Held[i].Step, err = c.cfg.Source.Proposer(ctx, id, d.Held[i].ActionID); err != nil {
				c.failed(w, r, "the agent's step that proposed action "+d.Held[i].ActionID, err)
				return
			}
		}
	}
	if n := len(d.Steps); n > MaxSteps {
		d.Steps = d.Steps[n-MaxSteps:]
	}
	if len(d.Steps) > 0 {
		d.EarlierSteps = d.Steps[0].Sequence
	}
	c.render(w, status, "task", page{Title: "Task " + id, Nav: "tasks", Home: s.home(), CSRF: s.csrf, Data: d})
}

// command is the snapnode command name as this node is named
// (Config.NodeFlags), then args.
func (c *Console) command(name string, args ...string) string {
	return command(c.cfg.NodeFlags, name, args...)
}

// proposer returns the step of steps that proposed actionID, the last
// whose observation names it (as the runtime finds it to settle a
// decision); nil when none does (a peer's action, or one proposed before
// them: Source.Proposer finds it).
func proposer(steps []agent.Interaction, actionID string) *agent.Interaction {
	for i := len(steps) - 1; i >= 0; i-- {
		if o := steps[i].Observation; o != nil && o.ActionID == actionID {
			return &steps[i]
		}
	}
	return nil
}

// newestAudit returns the newest MaxAuditEntries audit entries of
// taskID, in seq order, and how many earlier ones it left out: it reads
// those entries and counts the earlier ones in the task's index, however
// long the task's trail.
func (c *Console) newestAudit(ctx context.Context, taskID string) ([]audit.Entry, int, error) {
	keep, err := c.cfg.Source.Audit(ctx, audit.Filter{Task: taskID, Newest: true, Limit: MaxAuditEntries})
	if err != nil || len(keep) < MaxAuditEntries {
		return keep, 0, err
	}
	earlier, err := c.cfg.Source.AuditCount(ctx, audit.Filter{Task: taskID, BeforeSeq: keep[0].Seq})
	if err != nil {
		return nil, 0, err
	}
	return keep, int(earlier), nil
}

// riskOf returns the risk the validation of actionID recorded in the
// audit log, or "".
func riskOf(entries []audit.Entry, actionID string) string {
	for _, e := range entries {
		if e.Action == actionID && e.Step == audit.StepValidated {
			var v struct {
				Risk string `json:"risk"`
			}
			if json.Unmarshal(e.Detail, &v) == nil {
				return v.Risk
			}
		}
	}
	return ""
}

// maxReason bounds a denial's reason.
const maxReason = proposals.MaxReason

// decide is POST <home>tasks/{id}/decide: decision=approve|deny,
// action=ID, reason=… (deny). It goes through the Decider with the
// session's operator identity, then redirects to the task page.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	action := r.PostFormValue("action")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	var approve bool
	switch r.PostFormValue("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		c.renderTask(w, r, s, http.StatusBadRequest, "", fmt.Sprintf("decision %q: want approve or deny", r.PostFormValue("decision")))
		return
	}
	if len(reason) > maxReason {
		c.renderTask(w, r, s, http.StatusBadRequest, "", fmt.Sprintf("reason: at most %d bytes (it has %d)", maxReason, len(reason)))
		return
	}
	if action == "" {
		c.renderTask(w, r, s, http.StatusBadRequest, "", "action: name the held action to decide on")
		return
	}
	// An approval is bound to the diff its page showed: the approve form
	// names it, and without it the Decider would approve whatever the
	// action holds now. A form that names none is not this console's
	// page's: refused, nothing decided.
	diff := r.PostFormValue("diff")
	if approve && !proposals.ValidDiffSum(diff) {
		c.renderTask(w, r, s, http.StatusBadRequest, "", "diff: the approval does not name the diff it was shown (a SHA-256 in hex): reload the page, review the diff and approve again")
		return
	}
	word := map[bool]string{true: "approved", false: "denied"}[approve]
	// The decision is carried out whatever becomes of the browser's
	// connection: one cut half-way must not fail the approved action.
	ctx := context.WithoutCancel(r.Context())
	d := proposals.Decision{TaskID: id, ActionID: action, Approver: s.operator, Approve: approve, Reason: reason, Diff: diff}
	if _, err := c.cfg.Decider.Decide(ctx, d); err != nil {
		c.cfg.Logger.Warn("console: decision refused", "task", id, "action", action, "decision", word, "operator", s.operator, "err", err)
		c.renderTask(w, r, s, http.StatusConflict, "", err.Error())
		return
	}
	if approve {
		// An approval that found the files changed holds the action
		// again, with the new diff: say so, not "approved".
		if held, err := c.cfg.Source.HeldAction(ctx, id, action); err == nil && held != nil {
			word = "held-again"
		} else if _, failed := c.failure(ctx, id, action); failed {
			// Carried out, but it failed (the policy in force refused
			// it, a precondition no longer holds…): not "approved".
			word = "failed"
		}
	}
	c.cfg.Logger.Info("console: operator decided", "task", id, "action", action, "decision", word, "operator", s.operator)
	http.Redirect(w, r, s.home()+"tasks/"+url.PathEscape(id)+"?done="+word+"&action="+url.QueryEscape(action), http.StatusSeeOther)
}

// diffFile is GET <home>tasks/{id}/held/{action}/diff?sum=…: the whole
// diff of a held action, the bytes whose SHA-256 the page's Approve
// names, as a plain-text attachment: the page shows at most its first
// MaxDiffText bytes. A sum that is not the diff's (it changed since the
// page showed it) is refused: what is downloaded is what Approve names.
func (c *Console) diffFile(w http.ResponseWriter, r *http.Request, s *session) {
	id, action, sum := r.PathValue("id"), r.PathValue("action"), r.URL.Query().Get("sum")
	if !proposals.ValidDiffSum(sum) {
		c.message(w, r, http.StatusBadRequest, "Bad link", "The link does not name the diff's SHA-256 (sum): download it from the task page.")
		return
	}
	p, err := c.cfg.Source.HeldAction(r.Context(), id, action)
	if err != nil {
		c.failed(w, r, "action "+action+" of task "+id, err)
		return
	}
	if p == nil {
		c.message(w, r, http.StatusNotFound, "Not held", "Task "+id+" holds no action "+action+": decided or withdrawn since, or another task's.")
		return
	}
	if proposals.DiffSum(p.Diff) != sum {
		c.message(w, r, http.StatusConflict, "Diff changed", "The diff of action "+action+" changed since the page showed it: reload the task page and review the new diff.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + "-" + action + ".diff"}))
	// Never a page, were a browser to show it: no script, no origin.
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox; frame-ancestors 'none'")
	h.Set("Content-Length", strconv.Itoa(len(p.Diff)))
	io.WriteString(w, p.Diff)
}

// failure reports whether actionID of taskID ended failed, by its newest
// audit entry, and the reason recorded.
func (c *Console) failure(ctx context.Context, taskID, actionID string) (string, bool) {
	if actionID == "" {
		return "", false
	}
	last, err := c.cfg.Source.Audit(ctx, audit.Filter{Task: taskID, Action: actionID, Newest: true, Limit: 1})
	if err != nil || len(last) != 1 || last[0].Action != actionID || last[0].Step != audit.StepFailed {
		return "", false
	}
	return last[0].Reason, true
}

type auditData struct {
	Report   audit.Report
	Error    string // the verification's failure, or ""
	Tampered bool
	// RecordError: the node's record of its last seal could not be read
	// (audit.ErrSealRecord), not evidence of tampering; the chain was
	// verified without it (Error is then the chain's failure, or "").
	RecordError string
	// OtherKey: the failure is a seal or checkpoint another key signed
	// (audit.ErrOtherKey).
	OtherKey bool
	// Seals is what the verification says of the seals, as `snapnode
	// audit verify` prints it.
	Seals   audit.SealStatus
	Entries []audit.Entry // newest first
}

// auditPage is GET <home>audit: the verification status, the last seal
// and the newest entries.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	var d auditData
	rep, err := c.cfg.Source.VerifyAudit(ctx)
	d.Report, d.Seals = rep, audit.SealStatusOf(rep, err)
	var unread *audit.RecordError
	if errors.As(err, &unread) {
		// A record of the last seal that cannot be read is no evidence of
		// tampering, as audit verify says: the chain, verified without
		// it, is shown as it is.
		d.RecordError, err = unread.Record.Error(), unread.Chain
	}
	if err != nil {
		d.Error, d.OtherKey = err.Error(), errors.Is(err, audit.ErrOtherKey)
		d.Tampered = errors.Is(err, audit.ErrTampered)
	}
	if d.Entries, err = c.cfg.Source.Audit(ctx, audit.Filter{Newest: true, Limit: MaxAuditEntries}); err != nil {
		c.failed(w, r, "the audit log", err)
		return
	}
	slices.Reverse(d.Entries)
	c.render(w, http.StatusOK, "audit", page{Title: "Audit log", Nav: "audit", Home: s.home(), CSRF: s.csrf, Data: d})
}

// metric is one line of the metrics page: a series and its value (a
// histogram's count and mean).
type metric struct {
	Name, Labels, Help, Value string
}

// metricsPage is GET <home>metrics: the node's own series.
func (c *Console) metricsPage(w http.ResponseWriter, r *http.Request, s *session) {
	var rows []metric
	if c.cfg.Metrics != nil {
		fams, err := c.cfg.Metrics.Gather()
		if err != nil && len(fams) == 0 {
			c.failed(w, r, "gathering the metrics", err)
			return
		}
		for _, f := range fams {
			if !strings.HasPrefix(f.GetName(), "snapnode_") {
				continue
			}
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				row := metric{Name: f.GetName(), Labels: strings.Join(labels, " "), Help: f.GetHelp()}
				switch {
				case m.GetCounter() != nil:
					row.Value = number(m.GetCounter().GetValue())
				case m.GetGauge() != nil:
					row.Value = number(m.GetGauge().GetValue())
				case m.GetHistogram() != nil:
					h := m.GetHistogram()
					row.Value = fmt.Sprintf("%d observed", h.GetSampleCount())
					if n := h.GetSampleCount(); n > 0 {
						row.Value += ", mean " + number(h.GetSampleSum()/float64(n))
					}
				default:
					continue
				}
				rows = append(rows, row)
			}
		}
	}
	c.render(w, http.StatusOK, "metrics", page{Title: "Metrics", Nav: "metrics", Home: s.home(), CSRF: s.csrf, Refresh: 10, Data: rows})
}

// number formats v briefly.
func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// partsText renders message or artifact parts as text: text as is, data
// as indented JSON, the others named; MaxPartText bytes of them in all,
// the rest counted: a message's parts together, not each part alone (a
// peer's message of a hundred parts of 2.5 KiB each, a hundred such
// messages, made a page of 25 MiB, and a data part, indented, a line to
// each element of an array, was shown whole).
func partsText(ps []tasks.Part) string {
	var out []string
	left := MaxPartText
	for i, p := range ps {
		if left <= 0 {
			out = append(out, fmt.Sprintf("… (%d more parts not shown)", len(ps)-i))
			break
		}
		var s string
		switch {
		case p.Text != nil:
			s = *p.Text
		case p.Data != nil:
			s = indented(p.Data)
		case p.URL != nil:
			s = "[link] " + *p.URL
		case p.Raw != nil:
			s = fmt.Sprintf("[%s, %d bytes of base64]", p.MediaType, len(*p.Raw))
		default:
			continue
		}
		// Bounded as shown (executor.VisiblePrefix): a character
		// spelled out takes up to twelve times its bytes.
		kept, used := executor.VisiblePrefix(s, left, false)
		left -= len(kept) + 1 // and the line between parts
		if used < len(s) {
			note := fmt.Sprintf("\n… (%d more bytes not shown", len(s)-used)
			if rest := len(ps) - i - 1; rest > 0 {
				note += fmt.Sprintf(", and %d more parts", rest)
			}
			out = append(out, kept+note+")")
			break
		}
		out = append(out, kept)
	}
	return strings.Join(out, "\n")
}

// showCut is s as the page shows it, cut to max bytes as shown
// (executor.VisiblePrefix: its invisible characters spelled out, with
// marked its look-alike letters too; never cut inside a character or a
// marker), ending with a line that counts the bytes of s left out,
// followed by note.
func showCut(s string, max int, marked bool, note string) string {
	kept, used := executor.VisiblePrefix(s, max, marked)
	if used == len(s) {
		return kept
	}
	return fmt.Sprintf("%s\n… (%d %s)", kept, len(s)-used, note)
}

// showDiffCut is diff as the page shows it, its invisible characters and
// the look-alike letters of its paths spelled out
// (executor.VisibleDiffPrefix), cut to max bytes as shown, ending with a
// line that counts the bytes of diff left out, followed by note; shown
// is how many bytes of diff it shows.
func showDiffCut(diff string, max int, note string) (marked string, shown int) {
	kept, used := executor.VisibleDiffPrefix(diff, max)
	if used == len(diff) {
		return kept, used
	}
	return fmt.Sprintf("%s\n… (%d %s)", kept, len(diff)-used, note), used
}

// showPaths is the paths of pres as the page shows them (fileView), up
// to MaxPartText bytes of them in all as shown (each path is bounded,
// not their number): a path cut ends with the bytes of it left out, and
// later counts the paths left out after the ones shown.
func showPaths(pres []executor.PreImage) (files []fileView, later int) {
	left := MaxPartText
	for i, pre := range pres {
		shown, used := executor.VisiblePrefix(pre.Path, left, true)
		if used < len(pre.Path) {
			if used == 0 {
				return files, len(pres) - i
			}
			shown = fmt.Sprintf("%s … (%d more bytes not shown)", shown, len(pre.Path)-used)
			return append(files, fileView{Path: shown, LookAlike: scripts.Has(pre.Path)}), len(pres) - i - 1
		}
		left -= len(shown)
		files = append(files, fileView{Path: shown, LookAlike: scripts.Has(pre.Path)})
	}
	return files, 0
}

// prettyJSON indents b (or keeps it as is when it is not JSON), with
// every invisible character shown (executor.Visible): what a requester
// sent is shown as it is, bidi overrides and zero-width characters
// included, never as what they make it look like.
func prettyJSON(b []byte) string { return executor.Visible(indented(b)) }

// indented is b indented, or as it is when it is not JSON.
func indented(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}
