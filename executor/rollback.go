package executor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
)

// Rollback undoes the promoted action actionID from its snapshot, all of
// it or nothing: only if every path it touched still holds what the
// promotion left there (else the sandbox's ErrDiverged, naming the path).
// It is the host's alone; the caller makes sure of that. Audited
// "rolled_back" (decision "restored", or "refused" with the reason). A
// rollback the sandbox leaves half-way (sandbox.ErrIncomplete) is
// completed at once from the snapshot, as RecoverInterrupted would at the
// next start (decision "recovered"); should that fail too, the record
// stays rolling_back, for RecoverInterrupted, and the error says both. The
// time is recorded for every path it restored: within the rollback
// cooldown, any requester's action that changes one of them then needs
// confirmation. An unknown action, or one that is not promoted, is
// ErrNotPromoted; one whose snapshot is past the bounds the host keeps
// (pruned already, or older than Config.SnapshotMaxAge) is
// ErrSnapshotPruned, and nothing changes.
func (e *Executor) Rollback(ctx context.Context, actionID string) error {
	r, err := e.store.get(ctx, actionID)
	if err == nil && r.State == stateRolledBack {
		return fmt.Errorf("action %s: %w (at %s)", actionID, ErrAlreadyRolledBack, r.RolledBack.UTC().Format(time.RFC3339))
	}
	if errors.Is(err, errNoRecord) {
		return fmt.Errorf("%w: %q is unknown (a wrong id, or its record went with its task past task_retention)", ErrNotPromoted, actionID)
	}
	if err == nil && r.State != statePromoted {
		return fmt.Errorf("%w: %q is %s", ErrNotPromoted, actionID, r.State)
	}
	if err != nil {
		return err
	}
	if err := e.snapshotKept(ctx, r); err != nil {
		return err
	}
	snap, err := sandbox.ParseSnapshot(r.Snapshot)
	if err != nil {
		return fmt.Errorf("executor: rollback %s: %w", actionID, err)
	}
	token, ok, err := e.store.claim(ctx, actionID, statePromoted, stateRollingBack, e.now())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q (another rollback took it)", ErrNotPromoted, actionID)
	}
	r.Claim = token // each later write is conditioned on it
	// The sandbox checks, holding its locks, that the record is still
	// this call's before it restores anything (see stillHeld).
	sb := e.sb.Checked(e.stillHeld(actionID, stateRollingBack, token))
	var rerr error
	if e.rollbackFault != nil {
		rerr = e.rollbackFault(ctx, sb, snap)
	} else {
		rerr = sb.Rollback(ctx, snap)
	}
	if errors.Is(rerr, ErrTakenUp) {
		// Taken up by another process's recovery before anything was
		// restored: the record is the recovery's to settle.
		return rerr
	}
	bg := context.WithoutCancel(ctx)
	j := e.recordJournal(r)
	if errors.Is(rerr, sandbox.ErrIncomplete) {
		// Left half-way: some paths restored, others not. Back to
		// promoted, the record would claim what the workspace no longer
		// holds; it is completed instead, as at the next start.
		r.State = stateRollingBack
		return e.settleHalfWay(bg, j, r, "rollback", "completing", rerr)
	}
	if rerr != nil {
		// The record back to promoted and the refusal, in one commit;
		// none if another process took the rollback up meanwhile (and
		// completed it).
		j.add(audit.Entry{Actor: Host, Step: audit.StepRolledBack, Decision: "refused", Reason: rerr.Error()})
		err := j.commit(bg, func(ctx context.Context, tx *sql.Tx) error {
			ok, err := e.store.releaseTx(ctx, tx, actionID, stateRollingBack, statePromoted, token, e.now())
			if err == nil && !ok {
				err = fmt.Errorf("%w: action %s is no longer %s", ErrTakenUp, actionID, stateRollingBack)
			}
			return err
		})
		if err != nil {
			return err
		}
		return fmt.Errorf("executor: rollback %s: %w", actionID, rerr)
	}
	return e.rolledBack(bg, j, r, snap, "restored", nil, "", recoveredDetail{})
}

// snapshotKept returns ErrSnapshotPruned, saying when and why, if the
// promoted record r has no snapshot left: pruned, or older than the age
// bound (pruned now, so that every later call answers the same).
func (e *Executor) snapshotKept(ctx context.Context, r *record) error {
	cutoff := e.snapshotCutoff()
	if r.SnapshotPruned.IsZero() && len(r.Snapshot) > 0 && (cutoff.IsZero() || !r.SnapshotAt.Before(cutoff)) {
		return nil
	}
	if r.SnapshotPruned.IsZero() && len(r.Snapshot) > 0 {
		r.SnapshotPruned = e.now()
		if err := e.store.pruneOne(ctx, r.ActionID, r.SnapshotPruned); err != nil {
			return err
		}
	}
	return fmt.Errorf("action %s: %w at %s (stored at %s; the host keeps rollback snapshots %s and %s, the oldest pruned first): it can no longer be rolled back",
		r.ActionID, ErrSnapshotPruned, r.SnapshotPruned.UTC().Format(time.RFC3339), r.SnapshotAt.UTC().Format(time.RFC3339),
		e.keptAge(), e.keptBytes())
}

func (e *Executor) keptAge() string {
	if e.snapAge < 0 {
		return "whatever their age"
	}
	return "for " + e.snapAge.String()
}

func (e *Executor) keptBytes() string {
	if e.snapBytes < 0 {
		return "whatever their size"
	}
	return fmt.Sprintf("up to %d bytes per requester", e.snapBytes)
}

// rolledBack records a completed rollback: the record, its audit entry,
// the paths it restored (for the cooldown) and the requester's usage less
// what the promotion added, in one commit.
//
// A recovery's completion (how "recovered") may have left paths as found
// (left, see undoAround): its entry gives reason and d, and those paths
// are not counted as restored.
func (e *Executor) rolledBack(ctx context.Context, j *journal, r *record, snap *sandbox.Snapshot, how string,
	left []sandbox.Divergence, reason string, d recoveredDetail) error {
	now := e.now()
	r.State, r.Updated, r.RolledBack = stateRolledBack, now, now
	undo := undoDiffs(snap)
	pre, post := fileHashes(undo)
	entry := audit.Entry{Actor: Host, Step: audit.StepRolledBack, Decision: how, PreHash: pre, PostHash: post,
		Detail: detail(touched(undo))}
	if len(left) > 0 {
		entry.PreHash, entry.PostHash, entry.Reason, entry.Detail = "", "", reason, d.fitted()
	}
	j.add(entry)
	kept := make(map[string]bool, len(left))
	for _, l := range left {
		kept[l.Path] = true
	}
	settle := e.settle(r, stateRollingBack)
	return j.commit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := settle(ctx, tx); err != nil {
			return err
		}
		if err := e.store.countTx(ctx, tx, r.Requester, negative(snap.Delta())); err != nil {
			return err
		}
		if e.cooldown < 0 {
			return nil
		}
		paths := make([]string, 0, len(snap.Entries))
		for _, en := range snap.Entries {
			if !kept[en.Path] {
				paths = append(paths, en.Path)
			}
		}
		// In one order, so that two rollbacks sharing paths lock their rows
		// in the same order (PostgreSQL).
		slices.Sort(paths)
		return e.store.rolledBackTx(ctx, tx, paths, now, now.Add(-e.cooldown))
	})
}

// undoDiffs describes a rollback as diffs: each path from its post-image
// back to its pre-image (contents left out).
func undoDiffs(snap *sandbox.Snapshot) []sandbox.Diff {
	out := make([]sandbox.Diff, 0, len(snap.Entries))
	for _, en := range snap.Entries {
		before, after := en.Post, en.Pre
		before.Content, after.Content = nil, nil
		out = append(out, sandbox.Diff{Path: en.Path, Before: before, After: after})
	}
	return out
}

// RecoverInterrupted finishes what a crash interrupted, and returns how
// many actions it settled. Call it at start-up, before serving, in the one
// process that promotes into this sandbox; processes sharing the database
// and sandbox call RecoverInterruptedWith instead (another one may be
// promoting right now: its actions look interrupted too).
//
//   - An action caught promoting is undone from its stored snapshot with
//     sandbox.Recover (each path back to its pre-image, whether the
//     promotion reached it or not) and fails, audited "failed": its
//     result was never reported, so none of it stays.
//   - A rollback caught half-way is completed the same way.
//   - An approval caught before promotion goes back to pending.
//
// The first pass of a process (and one after a recovery's commit failed)
// also removes the sandbox's records of the edits a recovery kept (see
// sandbox.ForgetKeptExcept) whose action is settled: a stop between a
// recovery's commit and the removal of its record leaves one.
//
// An action whose paths have since been changed by something else is left
// in its state (taken over, see recover) and logged; the others are still settled. A promotion or
// rollback that the sandbox leaves half-way in a running process
// (sandbox.ErrIncomplete) is settled the same way at once, by the call
// that met it; only one whose settling failed too is left for this.
func (e *Executor) RecoverInterrupted(ctx context.Context) (int, error) {
	return e.RecoverInterruptedWith(ctx, RecoverOptions{})
}

// RecoverOptions let processes that share one database (and sandbox)
// recover each other's interrupted actions safely.
type RecoverOptions struct {
	// Before, when set, leaves alone the actions last changed at or after
	// it: another process may be carrying them out right now.
	Before time.Time
	// Claim, when set, is called before an action is recovered: ok false
	// (another process holds it) leaves the action to that process; when
	// ok, the action is read again (another process may have recovered
	// it meanwhile) and release is called once it is settled.
	Claim func(ctx context.Context, actionID string) (release func(), ok bool, err error)
}

// RecoverInterruptedWith is RecoverInterrupted narrowed by o.
func (e *Executor) RecoverInterruptedWith(ctx context.Context, o RecoverOptions) (int, error) {
	n := 0
	var errs []error
	for _, state := range []string{statePromoting, stateRollingBack, stateApproving} {
		rs, err := e.store.list(ctx, state, "")
		if err != nil {
			return n, err
		}
		for _, r := range rs {
			if !o.Before.IsZero() && !r.Updated.Before(o.Before) {
				continue
			}
			ok, err := e.recoverClaimed(ctx, r, o)
			if err != nil {
				e.logger.Error("executor: recover action", "action", r.ActionID, "state", r.State, "err", err)
				errs = append(errs, err)
				continue
			}
			if ok {
				n++
			}
		}
	}
	e.forgetKeptLeft(ctx)
	return n, errors.Join(errs...)
}

// forgetKeptLeft removes, when one may be left (keptLeft), the sandbox's
// records of the edits a recovery kept whose action is settled: the
// process stopped between a recovery's commit and the removal of its
// record (ForgetKept), that removal failed, or the commit stood, its
// answer lost. No recovery reads such a record again, and each one left
// would stay for ever. The record of an action still promoting or rolling
// back stays, whatever process is to recover it: it names the action's
// kept files again should that recovery's result not have been recorded.
// The actions are read under the sandbox's folder lock, which a recovery
// holds while it writes its record (sandbox.ForgetKeptExcept). A failure
// is logged, and tried again at the next pass: so is an action still
// promoting or rolling back whose snapshot cannot be read (see
// unsettled), which keeps every record.
func (e *Executor) forgetKeptLeft(ctx context.Context) {
	if !e.keptLeft.Swap(false) {
		return
	}
	n, err := e.sb.ForgetKeptExcept(ctx, e.unsettled)
	if err != nil {
		e.keptLeft.Store(true)
		e.logger.Warn("executor: could not remove the sandbox's records of the edits recoveries kept of settled actions; tried again at the next pass", "err", err)
		return
	}
	if n > 0 {
		e.logger.Info("executor: removed the sandbox's records of the edits recoveries kept of settled actions, left by a stop after their commit", "count", n)
	}
}

// unsettled lists the actions a recovery may yet settle: those promoting
// or rolling back. One whose snapshot this version cannot read (a newer
// version's, during a mixed-version rollout) may own a record too, named
// from that snapshot as the newer version reads it, which this one cannot
// tell from the others: unsettled then fails, and no record is removed
// (forgetKeptLeft tries again at its next pass, and logs why).
func (e *Executor) unsettled(ctx context.Context) ([]sandbox.KeptOwner, error) {
	var out []sandbox.KeptOwner
	for _, state := range []string{statePromoting, stateRollingBack} {
		rs, err := e.store.list(ctx, state, "")
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			snap, err := sandbox.ParseSnapshot(r.Snapshot)
			if err != nil {
				return nil, fmt.Errorf("executor: action %s, still %s, has a snapshot this version cannot read, so the record of the files a recovery of it kept cannot be told from the others; all are kept until it is settled: %w",
					r.ActionID, state, err)
			}
			out = append(out, sandbox.KeptOwner{Snapshot: snap, ID: r.ActionID})
		}
	}
	return out, nil
}

// recoverClaimed recovers r, claimed through o.Claim when it is set, and
// reports whether it did.
func (e *Executor) recoverClaimed(ctx context.Context, r *record, o RecoverOptions) (bool, error) {
	if o.Claim == nil {
		return e.recover(ctx, r)
	}
	release, ok, err := o.Claim(ctx, r.ActionID)
	if err != nil || !ok {
		return false, err
	}
	defer release()
	now, err := e.store.get(ctx, r.ActionID)
	if err != nil {
		return false, err
	}
	if now.State != r.State || !now.Updated.Equal(r.Updated) {
		return false, nil // another process settled it meanwhile
	}
	return e.recover(ctx, now)
}

// recover settles r, as read, and reports whether it did: not when the
// call that held it moved it on since.
func (e *Executor) recover(ctx context.Context, r *record) (bool, error) {
	if e.recovering != nil {
		e.recovering(r.ActionID)
	}
	if r.State == stateApproving {
		// Handed back under the claim token read: the record goes
		// pending without one, so that the approval that stood still,
		// whatever claim comes next, no longer holds it.
		// One the approver moved on since (promoted it, failed it, gave
		// it back) is not this pass's to count.
		r.State, r.Updated = statePending, e.now()
		return e.store.update(ctx, r, stateApproving)
	}
	// Taken from the call that holds it, under the claim token read,
	// before any path is put back: that call may only have stood still,
	// and its commit (a promotion's promoted, a rollback's release back
	// to promoted) land between the read and the undo, which would then
	// leave the record claiming what the workspace no longer holds. One
	// that landed first leaves nothing to take; once taken, it fails
	// (ErrTakenUp).
	token, ok, err := e.store.takeOver(ctx, r.ActionID, r.State, r.Claim, e.now())
	if err != nil || !ok {
		return false, err
	}
	r.Claim = token
	// A path something else changed since the promotion is left as
	// found, not refused (see undoAround): the action is settled all the
	// same, for no later pass could put such a path back, and a record
	// left held would stop every start. A call that only stood still
	// past the cutoff, and finds the action taken over, then fails
	// (ErrTakenUp), as after any take-over.
	return true, e.undoAround(ctx, e.recordJournal(r), r, true)
}

// ReasonInterrupted is the reason of an action whose promotion was
// cut short and undone.
const ReasonInterrupted = "interrupted during promotion; its effects were undone"

// undo settles r, caught promoting or rolling back half-way (by a crash,
// or in this process by sandbox.ErrIncomplete), from its stored snapshot:
// each path back to its pre-image with sandbox.Recover, whether the
// promotion or rollback reached it or not. A promotion then fails
// (ReasonInterrupted, audited "failed", decision "recovered"), a
// rollback is completed (audited "rolled_back", decision "recovered"):
// the record and the entries j holds, in one commit. When Recover fails
// (a path changed since by something else, the disk failing), nothing is
// recorded and r stays as it is; so too when r is no longer held under
// its claim token as Recover starts (ErrTakenUp, see stillHeld: another
// recovery took it up, and settles it).
func (e *Executor) undo(ctx context.Context, j *journal, r *record) error {
	return e.undoAround(ctx, j, r, false)
}

// undoAround is undo; when around, with sandbox.RecoverAround: a path
// something else changed since the promotion (neither image) is left as
// found, every other path is put back, and r is settled all the same. A
// promotion then fails with a reason naming each path left, the hash the
// promotion left there and the one found, and what to check
// (divergedReason); a rollback is completed, its audit entry saying the
// same. The entry's detail lists them ("diverged"), and the log says so
// at warn level.
func (e *Executor) undoAround(ctx context.Context, j *journal, r *record, around bool) error {
	from := r.State
	snap, err := sandbox.ParseSnapshot(r.Snapshot)
	if err != nil {
		return fmt.Errorf("executor: recover %s: %w", r.ActionID, err)
	}
	sb := e.sb.Checked(e.stillHeld(r.ActionID, from, r.Claim))
	var left []sandbox.Divergence
	if around {
		left, err = sb.RecoverAroundFor(ctx, snap, r.ActionID)
	} else {
		err = sb.Recover(ctx, snap)
	}
	if err != nil {
		return fmt.Errorf("executor: recover %s: %w", r.ActionID, err)
	}
	reason := ReasonInterrupted
	if len(left) > 0 {
		reason = divergedReason(from, left)
		e.logger.Warn("executor: an interrupted action's files changed since; left as found, the action settled without them",
			"action", r.ActionID, "task", r.Task, "state", from, "paths", divergedPaths(left), "reason", reason)
	}
	d := recoveredDetail{touchedDetail: touched(undoDiffs(snap)), Diverged: diverged(left)}
	if from == stateRollingBack {
		err = e.rolledBack(ctx, j, r, snap, "recovered", left, reason, d)
	} else {
		r.State, r.Reason, r.Updated = stateFailed, reason, e.now()
		j.add(audit.Entry{Actor: Host, Step: audit.StepFailed, Decision: "recovered", Reason: r.Reason, Detail: d.fitted()})
		err = j.commit(ctx, e.settle(r, from))
	}
	if !around {
		return err
	}
	if err != nil {
		// It may have stood all the same, its answer lost: its record
		// would then be left (forgetKeptLeft).
		e.keptLeft.Store(true)
		return err
	}
	// The names of the edits kept are recorded now: the sandbox's own
	// record of them, which named them again to a recovery that came
	// after this commit failed (or the process stopped before it), can
	// go. Through e.sb, not sb: r is no longer held. Should it stay, it
	// is r's, which no recovery reads again, and the next pass removes
	// it (forgetKeptLeft), as the next start does one a stop left.
	if ferr := e.sb.ForgetKept(context.WithoutCancel(ctx), snap, r.ActionID); ferr != nil {
		e.keptLeft.Store(true)
		e.logger.Warn("executor: could not remove the sandbox's record of the edits a recovery kept; it is not read again, and the next recovery pass removes it", "action", r.ActionID, "err", ferr)
	}
	return nil
}

// ReasonDiverged begins the reason of an action whose promotion was cut
// short and undone but for paths something else changed since.
const ReasonDiverged = "interrupted during promotion; its effects were undone but for "

// maxDivergedNamed bounds the paths a reason names (the audit entry's
// detail lists them all, as they fit).
const maxDivergedNamed = 8

// divergedReason says what an interrupted promotion (or rollback, from)
// left as found: each path (up to maxDivergedNamed), what the promotion
// left there and what was found, and what to check.
func divergedReason(from string, left []sandbox.Divergence) string {
	var b strings.Builder
	if from == stateRollingBack {
		b.WriteString("interrupted during rollback; completed but for ")
	} else {
		b.WriteString(ReasonDiverged)
	}
	fmt.Fprintf(&b, "%d path(s) changed since, left as found: ", len(left))
	kept, neither := 0, 0
	for _, l := range left {
		if l.Kept != "" {
			kept++
		} else {
			neither++
		}
	}
	for i, l := range left {
		if i == maxDivergedNamed {
			fmt.Fprintf(&b, "; and %d more (see the audit log)", len(left)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if l.Kept != "" {
			fmt.Fprintf(&b, "%s (%s; %s)", l.Path, holdsWords(l), l.Note)
			continue
		}
		fmt.Fprintf(&b, "%s (the promotion left %s, found %s)", l.Path, imageWords(l.Post, ""), imageWords(l.Found, l.Note))
	}
	switch {
	case kept == 0:
		b.WriteString(". Check these files: each holds neither what the action wrote nor what was there before it (another action, or someone, changed it); the node changed none of them")
	case neither == 0:
		b.WriteString(". Check these files: the node left each path as found and moved the edited file out of its hidden name to the visible one given; compare the two and keep what you want")
	default:
		b.WriteString(". Check these files: those with no edit kept hold neither what the action wrote nor what was there before it (another action, or someone, changed it), and the node changed none of them; for the others the node left the path as found and moved the edited file out of its hidden name to the visible one given; compare the two and keep what you want")
	}
	return clean(b.String(), audit.MaxReasonLength, false)
}

// holdsWords says what a path whose edit was kept under another name
// (l.Kept) holds: the action's image, the one before it, or another.
func holdsWords(l sandbox.Divergence) string {
	holds := func(img sandbox.Image) bool {
		return img.Kind == sandbox.KindFile && l.Found.Kind == sandbox.KindFile && l.Found.SHA256 == img.SHA256
	}
	switch {
	case holds(l.Post):
		return "holds what the action wrote, sha256 " + l.Post.SHA256
	case holds(l.Pre):
		return "holds what was there before the action, sha256 " + l.Pre.SHA256
	case l.Found.Kind == "":
		return "the promotion left " + imageWords(l.Post, "") + ", found what the node does not read"
	}
	return "the promotion left " + imageWords(l.Post, "") + ", found " + imageWords(l.Found, "")
}

// imageWords names an image in a reason: a file's hash, "no file", "a
// directory", or note for what the sandbox does not read.
func imageWords(img sandbox.Image, note string) string {
	switch {
	case note != "" && img.Kind != sandbox.KindDir:
		return note
	case img.Kind == sandbox.KindFile:
		return "sha256 " + img.SHA256
	case img.Kind == sandbox.KindDir && note != "":
		return "a directory that " + note
	case img.Kind == sandbox.KindDir:
		return "a directory"
	}
	return "no file"
}

func divergedPaths(left []sandbox.Divergence) []string {
	out := make([]string, len(left))
	for i, l := range left {
		out[i] = l.Path
	}
	return out
}

// recoveredDetail is the detail of a recovery's entry: the paths it
// restored (see touched) and those it left as found.
type recoveredDetail struct {
	touchedDetail
	Diverged []divergedPath `json:"diverged,omitempty"`
}

// divergedPath is a path a recovery left as found: Expected the hash of
// what the promotion left there, Found the hash of what was found ("" for
// no file), the kinds when they are not files, Note what the sandbox
// does not read.
type divergedPath struct {
	Path         string       `json:"path"`
	Expected     string       `json:"expected"`
	ExpectedKind sandbox.Kind `json:"expected_kind"`
	Found        string       `json:"found"`
	FoundKind    sandbox.Kind `json:"found_kind,omitempty"`
	Before       string       `json:"before,omitempty"`
	Note         string       `json:"note,omitempty"`
	// Kept is the visible name the sandbox moved an edit of the path to,
	// found under its hidden name after the crash (see
	// sandbox.Divergence).
	Kept string `json:"kept,omitempty"`
}

func diverged(left []sandbox.Divergence) []divergedPath {
	if len(left) == 0 {
		return nil
	}
	out := make([]divergedPath, len(left))
	for i, l := range left {
		out[i] = divergedPath{Path: l.Path, Expected: l.Post.SHA256, ExpectedKind: l.Post.Kind,
			Found: l.Found.SHA256, FoundKind: l.Found.Kind, Before: l.Pre.SHA256, Note: clean(l.Note, 256, false), Kept: l.Kept}
	}
	return out
}

// fitted returns d within an entry's detail: the restored paths' images
// and diff go first, then as many diverged paths as fit, the first
// first (the reason names them too).
func (d recoveredDetail) fitted() []byte {
	if b := mustJSON(d); len(b) <= maxDetail {
		return b
	}
	d.touchedDetail = touchedDetail{Paths: []touchedPath{}, PathsCut: len(d.Paths) + d.PathsCut}
	for len(d.Diverged) > 0 && len(mustJSON(d)) > maxDetail {
		d.Diverged = d.Diverged[:len(d.Diverged)-1]
	}
	return detail(d)
}
