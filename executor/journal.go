package executor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// journal gathers the audit entries of one action's steps and appends
// them in one batch: before anything with an effect happens (a promotion,
// a stored record), and when the call ends. Steps that change nothing
// (received, validated, judged, sandboxed) may wait for the next flush;
// none is ever left out. When the action's record changes too, the
// entries go into the same transaction (commit): the record and the audit
// of the steps that led to it are durable together, in one commit.
type journal struct {
	log     *audit.Log
	db      *sqldb.DB
	task    string
	action  string
	entries []audit.Entry
	// level is the audit level of the action (see AuditLevels): the
	// entries are queued in full and written as it keeps them. Until the
	// action's risk is known it is the highest level.
	level string
	risk  proposal.Risk // "" until setRisk
	// first, when set, joins the transaction of the journal's first
	// commit (Request.Also).
	first txOp
	// refused is first's error when it failed its commit.
	refused error
	// firstDone is set once a commit carrying first stood.
	firstDone bool
	// then, when set, joins the transaction of the journal's last
	// commit (Request.Then), which last marks, with final, the Result
	// of the call.
	then  Then
	final *Result
	// promotedNoWait is Request.PromotedNoWait; noWait, when set, lets
	// the journal's next commit return before it reaches the disk.
	promotedNoWait, noWait bool
}

// noWaitWriter is a database that commits a write without waiting for
// the disk (sqldb.DB.WriteNoSync): when WriteNoSync returns, op's changes
// are committed, visible to every connection and safe from a killed
// process; the database's next commit that waits for the disk makes them
// durable too. A database without it commits such a write as any other.
type noWaitWriter interface {
	WriteNoSync(ctx context.Context, op func(context.Context, *sql.Tx) error) error
}

// last marks the journal's next commit (or flush) as the call's last,
// whose Result is res: the caller's Then joins it. It returns j.
func (j *journal) last(res *Result) *journal {
	if j.then != nil {
		j.final = res
	}
	return j
}

func (e *Executor) journal(task, actionID string) *journal {
	return &journal{log: e.audit, db: e.store.db, task: task, action: actionID, level: e.levels.highest()}
}

// setRisk sets the journal's level to the host's for risk r.
func (j *journal) setRisk(levels AuditLevels, r proposal.Risk) { j.risk, j.level = r, levels.of(r) }

// leveled returns the queued entries as the journal's level keeps them.
func (j *journal) leveled() []audit.Entry {
	out := make([]audit.Entry, len(j.entries))
	for i, en := range j.entries {
		out[i] = atLevel(en, j.level)
	}
	return out
}

// add queues an entry of this action, its text made fit for the log.
func (j *journal) add(en audit.Entry) {
	en.Task, en.Action = j.task, j.action
	en.Reason = clean(en.Reason, audit.MaxReasonLength, true)
	en.Decision = clean(en.Decision, audit.MaxDecisionLength, false)
	j.entries = append(j.entries, en)
}

// flush appends the queued entries, all or none.
func (j *journal) flush(ctx context.Context) error {
	if j.first != nil || j.final != nil {
		_, err := j.write(ctx, func(context.Context, *sql.Tx) error { return nil })
		return err
	}
	if len(j.entries) == 0 {
		return nil
	}
	if _, err := j.log.AppendBatch(ctx, j.leveled()); err != nil {
		return fmt.Errorf("executor: audit action %s: %w", j.action, err)
	}
	j.entries = j.entries[:0]
	return nil
}

// txOp is a write of the executor's tables inside a transaction.
type txOp = func(context.Context, *sql.Tx) error

// commit runs op (nil: flush) and appends the queued entries in one
// transaction: both are committed, or neither. op runs first, so that the
// log's head (locked on PostgreSQL until the commit) is taken last: held
// shortly, and never before a record's row, which could deadlock with an
// update of that record. The entries leave the queue once committed.
func (j *journal) commit(ctx context.Context, op txOp) error {
	_, err := j.write(ctx, op)
	return err
}

// refusal is an op's error that refuses what its commit was to record
// (a promotion past its requester's quota, see quotaTx): nothing of the
// commit stays, and the journal is left as it was before it — its
// entries queued, the caller's first and last writes (Request.Also,
// Then) still to join its next commit — so that the caller records the
// refusal as if it had been found before the commit. err is the cause.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// commitSteps is commit for a record of the steps queued (what was
// staged, what waits for an operator): should op fail, nothing of the
// transaction stays, and the entries are then appended on their own, for
// the steps happened all the same. The error is op's. A refusal (see
// refusal) leaves the entries queued instead, for the caller's commit of
// the refusal.
func (j *journal) commitSteps(ctx context.Context, op txOp) error {
	opFailed, err := j.write(ctx, op)
	var r *refusal
	if opFailed && !errors.As(err, &r) {
		if j.refused != nil && len(j.entries) > 0 {
			// The caller refused before anything ran (the task ended,
			// say): the log says so after the steps queued, rather
			// than end on a step that led nowhere.
			j.add(audit.Entry{Actor: j.entries[len(j.entries)-1].Actor, Step: audit.StepRejected, Decision: "refused",
				Reason: clean("refused before it ran: "+j.refused.Error(), 1024, false)})
		}
		if ferr := j.flush(context.WithoutCancel(ctx)); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return err
}

// write is commit, and reports whether op's error was the failure. A
// refusal of op leaves the journal as it was (see refusal).
func (j *journal) write(ctx context.Context, op txOp) (opFailed bool, _ error) {
	if op == nil {
		return false, j.flush(ctx)
	}
	firstWas, thenWas, finalWas := j.first, j.then, j.final
	if first := j.first; first != nil {
		// The caller's statement goes first, in this commit only: its
		// error fails the commit and is the op's.
		j.first = nil
		inner := op
		j.refused = nil
		op = func(ctx context.Context, tx *sql.Tx) error {
			if err := first(ctx, tx); err != nil {
				j.refused = err
				return err
			}
			return inner(ctx, tx)
		}
	}
	if then, res := j.then, j.final; res != nil {
		// The caller's write of the outcome goes last, in the call's
		// last commit only: its error fails the commit and is the op's.
		j.then, j.final = nil, nil
		inner := op
		op = func(ctx context.Context, tx *sql.Tx) error {
			if err := inner(ctx, tx); err != nil {
				return err
			}
			return then(ctx, tx, res)
		}
	}
	var (
		opErr, logErr error
		written       []audit.Entry
	)
	write := j.db.Write
	if w, ok := any(j.db).(noWaitWriter); ok && j.noWait {
		write = w.WriteNoSync
	}
	j.noWait = false
	err := write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if opErr = op(ctx, tx); opErr != nil {
			return opErr
		}
		if len(j.entries) > 0 {
			if written, logErr = j.log.AppendTx(ctx, tx, j.leveled()); logErr != nil {
				logErr = fmt.Errorf("executor: audit action %s: %w", j.action, logErr)
			}
		}
		return logErr
	})
	switch {
	case opErr != nil:
		if r := (*refusal)(nil); errors.As(opErr, &r) {
			j.first, j.then, j.final = firstWas, thenWas, finalWas
		}
		return true, opErr
	case logErr != nil:
		return false, logErr
	case err != nil: // the transaction itself: begin, commit, ctx
		return false, fmt.Errorf("executor: action %s: %w", j.action, err)
	}
	// Committed: the log knows them as its own, and seals over no chain
	// that lost them.
	j.log.Committed(written)
	j.entries = j.entries[:0]
	if firstWas != nil {
		j.firstDone = true
	}
	return false, nil
}

// maxDetail keeps an entry's detail well within the log's default cap.
const maxDetail = 12 << 10

// detail encodes v as an entry's Detail; one too large is replaced by
// what it would have said in brief.
func detail(v any) []byte {
	b := mustJSON(v)
	if len(b) > maxDetail {
		return mustJSON(map[string]any{"truncated": true, "bytes": len(b)})
	}
	return b
}

// clean makes s valid for a text field of the log: valid UTF-8, no NUL
// or other control character (but tabs and newlines when multiline), at
// most max bytes.
func clean(s string, max int, multiline bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			if multiline && (r == '\n' || r == '\t') {
				return r
			}
			return ' '
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	return textcut.Prefix(s, max-len("…")) + "…"
}

// Details of the entries, as JSON.

type receivedDetail struct {
	Format string `json:"format"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

type validatedDetail struct {
	Format     string   `json:"format"`
	ProposalID string   `json:"proposal_id"`
	Action     string   `json:"action"`
	Risk       string   `json:"risk"`
	Paths      []string `json:"paths,omitempty"`
	Steps      int      `json:"steps,omitzero"`
	Reasoning  string   `json:"reasoning,omitempty"`
	Intent     string   `json:"intent"`
	// AuditLevel is the host's level of the action; RequestedLogLevel and
	// RequestedRetainDays what a peer's descriptor asked for (recorded,
	// not applied).
	AuditLevel          string `json:"audit_level"`
	RequestedLogLevel   string `json:"requested_log_level,omitempty"`
	RequestedRetainDays int    `json:"requested_retain_days,omitzero"`
	// PathsCut counts the paths left out of Paths, which did not all fit
	// in an entry (see fitted).
	PathsCut int `json:"paths_cut,omitzero"`
}

// fitted returns d as it fits in an entry's detail: whole when it does;
// else with its intent and reasoning cut short and, if that is not
// enough, as many of its paths as fit, the shortest first, and the
// number left out (a composite's paths may be long and many: cut whole,
// the entry would name none of them).
func (d validatedDetail) fitted() validatedDetail {
	if len(mustJSON(d)) <= maxDetail {
		return d
	}
	d.Intent, d.Reasoning = clean(d.Intent, 1024, false), clean(d.Reasoning, 1024, true)
	if len(mustJSON(d)) <= maxDetail {
		return d
	}
	all := d.Paths
	d.Paths, d.PathsCut = nil, len(all)
	d.Paths = fitPaths(all, func(p string) string { return p }, maxDetail-len(mustJSON(d)))
	for d.PathsCut = len(all) - len(d.Paths); len(mustJSON(d)) > maxDetail && len(d.Paths) > 0; d.PathsCut++ {
		d.Paths = d.Paths[:len(d.Paths)-1] // what the room did not count: the member's name, the count's digits
	}
	return d
}

type judgedDetail struct {
	Reasons            []string `json:"reasons"`
	DecidedBy          []string `json:"decided_by"`
	Sandbox            bool     `json:"sandbox"`
	Operator           bool     `json:"operator"`
	RecentlyRolledBack bool     `json:"recently_rolled_back"`
}

type touchedDetail struct {
	Paths []touchedPath `json:"paths"`
	// PathsCut counts the paths left out of Paths, which did not all fit
	// in the entry even without their images.
	PathsCut int `json:"paths_cut,omitzero"`
	// Diff is the text of the change (FORENSIC only), cut to fit the
	// entry when DiffCut.
	Diff    string `json:"diff,omitempty"`
	DiffCut bool   `json:"diff_cut,omitzero"`
}

// touchedPath is one path and its images, which are left out (nil) when
// the paths and their images do not fit in the entry.
type touchedPath struct {
	Path   string         `json:"path"`
	Before *sandbox.Image `json:"before,omitempty"`
	After  *sandbox.Image `json:"after,omitempty"`
}

// touched describes diffs: every path with its images, and the diff text
// in what room the entry has left. Paths too many or too long for the
// entry with their images are named without them, as many as fit, the
// shortest first (PathsCut counts the others): the entry never loses
// every path to the cap on its detail.
func touched(diffs []sandbox.Diff) touchedDetail {
	d := touchedDetail{Paths: []touchedPath{}}
	for _, df := range diffs {
		d.Paths = append(d.Paths, touchedPath{Path: df.Path, Before: &df.Before, After: &df.After})
	}
	text := formatDiff(diffs)
	d.Diff = text
	for cut := len(text); len(mustJSON(d)) > maxDetail; {
		// Too long once escaped: cut it shorter until it fits, or
		// leave it out.
		if cut = cut * 3 / 4; cut < 64 {
			d.Diff, d.DiffCut = "", true
			break
		}
		d.Diff, d.DiffCut = clean(text, cut, true), true
	}
	if len(mustJSON(d)) <= maxDetail {
		return d
	}
	all := make([]touchedPath, len(d.Paths))
	for i, p := range d.Paths {
		all[i] = touchedPath{Path: p.Path}
	}
	d.Paths, d.PathsCut = []touchedPath{}, len(all)
	d.Paths = fitPaths(all, func(p touchedPath) string { return p.Path }, maxDetail-len(mustJSON(d)))
	for d.PathsCut = len(all) - len(d.Paths); len(mustJSON(d)) > maxDetail && len(d.Paths) > 0; d.PathsCut++ {
		d.Paths = d.Paths[:len(d.Paths)-1] // what the room did not count: the count's digits
	}
	return d
}

// fitPaths returns as many of ps as fit in room bytes of JSON, the
// shortest paths first (path gives each one's), so that long paths
// cannot crowd out the others.
func fitPaths[T any](ps []T, path func(T) string, room int) []T {
	byLen := slices.Clone(ps)
	slices.SortStableFunc(byLen, func(a, b T) int { return len(path(a)) - len(path(b)) })
	out := []T{}
	used := 0
	for _, p := range byLen {
		if used += len(mustJSON(p)) + 1; used > room {
			break
		}
		out = append(out, p)
	}
	return out
}

type errorDetail struct {
	Error jsontext.Value `json:"error"`
}

// decisionWord is the audit's word for a policy effect.
func decisionWord(e policy.Effect) string {
	switch e {
	case policy.Permit:
		return "promote"
	case policy.Confirm:
		return "confirm"
	}
	return "block"
}

// reasonText is what a person is told about a decision: its reasons,
// without the note that HIGH risk runs in the sandbox (every action does).
func reasonText(d policy.Decision) string {
	var rs []string
	for _, r := range d.Reasons {
		if !strings.HasPrefix(r, policy.RuleHighRiskSandbox) {
			rs = append(rs, r)
		}
	}
	return strings.Join(rs, "; ")
}
