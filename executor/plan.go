package executor

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
)

// Formats of what a Request carries.
const (
	formatProposal   = "proposal"
	formatDescriptor = "descriptor"
)

// item is what Run acts on once the bytes are valid: the steps of one
// proposal or descriptor (one step, or a composite's children), with the
// host's own descriptor of the whole.
type item struct {
	format     string
	proposalID string // the proposal's id, or the peer descriptor's action_id
	action     string // as spelled by the proposer, or the descriptor's type
	reasoning  string // the proposal's, for the audit
	composite  bool
	steps      []step
	desc       *proposal.Descriptor // the host's: Describe, or Compose of the steps'
	risk       proposal.Risk        // the higher of the host's and the peer's
	confirm    []string             // the host's reasons to confirm, from the descriptors
	says       []string             // the peer descriptor's own words: intent, reasons to confirm
	resources  proposal.Resources   // the smaller of the host's and the peer's caps
	pre        []precondition       // what a peer's descriptor declares must hold
	// listFirst, when above 0, lists only the first listFirst entries
	// of a LIST_FILES (Request.ListFirst: the host's reads alone).
	listFirst int
	peer      *proposal.Descriptor // the peer's descriptor as sent, nil for a proposal
	// requestedAudit is a peer descriptor's audit section: recorded, never
	// applied (the host's AuditLevels and retention are).
	requestedAudit proposal.Audit
}

// step is one leaf action.
type step struct {
	p       *proposal.Proposal   // its action and args; a descriptor's leaf as a proposal
	desc    *proposal.Descriptor // the host's descriptor of it
	risk    proposal.Risk
	confirm string // the host's note that the peer's descriptor asks for confirmation
}

// formatOf is what Run treats data as: a descriptor when
// proposal.Classify says so, a proposal otherwise (plain data and
// malformed JSON included, which proposal.Parse refuses naming what is
// wrong).
func formatOf(data []byte) string {
	if proposal.Classify(data) == proposal.FormatDescriptor {
		return formatDescriptor
	}
	return formatProposal
}

// parse validates data and derives the item, the host descriptor taking
// actionID. A refusal is a *proposal.Error.
func (e *Executor) parse(data []byte, actionID string) (*item, error) {
	it, err := e.parseData(data, actionID)
	if err == nil && e.cpu == nil {
		return nil, unenforceableCPU()
	}
	return it, err
}

// arrived checks what holds only when a proposal arrives (Run): a peer
// descriptor's created_at, and each child's, within the clock skew of now.
// An action read again from its record (for its approval, long after) or
// judged offline is not held to it.
func (e *Executor) arrived(it *item) error {
	if it.peer == nil || e.skew <= 0 {
		return nil
	}
	now := e.defaults.Now
	if now == nil {
		now = e.now
	}
	return proposal.CheckCreatedAt(it.peer, now(), e.skew)
}

// parseData is parse without the check that the host can enforce the
// item's caps.
func (e *Executor) parseData(data []byte, actionID string) (*item, error) {
	d := e.defaults
	if d.Now == nil {
		d.Now = e.now
	}
	top := d
	top.NewID = func() string { return actionID }
	if formatOf(data) == formatProposal {
		p, err := proposal.Parse(data)
		if err != nil {
			return nil, err
		}
		if err := checkPaths(p, ""); err != nil {
			return nil, err
		}
		desc := proposal.Describe(p, top)
		it := &item{
			format: formatProposal, proposalID: p.ID, action: p.Action.Spelling, reasoning: p.Reasoning,
			steps: []step{{p: p, desc: desc, risk: desc.RiskLevel}},
			desc:  desc, risk: desc.RiskLevel, resources: desc.Resources,
		}
		if desc.Confirmation.Required {
			it.confirm = []string{hostThreshold(desc)}
		}
		it.desc.Audit.LogLevel = e.levels.of(it.risk)
		return it, nil
	}
	peer, err := proposal.ParseDescriptor(data)
	if err != nil {
		return nil, err
	}
	it := &item{format: formatDescriptor, proposalID: peer.ActionID, action: string(peer.ActionType), requestedAudit: peer.Audit, peer: peer}
	it.says = append(it.says, peer.IntentSummary, peer.Confirmation.Reason)
	leaves := []*proposal.Descriptor{peer}
	it.pre = declared(peer, "", 0)
	if peer.ActionType == proposal.TypeMultiStepComposite {
		it.composite, leaves = true, peer.Children
		for i, c := range peer.Children {
			it.pre = append(it.pre, declared(c, "/children/"+strconv.Itoa(i), i)...)
		}
	}
	child := d // the children's host descriptors get ids of their own
	if child.NewID == nil {
		child.NewID = e.newID
	}
	var hostLeaves []*proposal.Descriptor
	for i, l := range leaves {
		k := l.Operation.Action
		if it.composite && k == proposal.KindFinish {
			return nil, &proposal.Error{
				Code: proposal.ErrValidation, Field: "/children/" + strconv.Itoa(i) + "/operation/action", Rule: "compositeStep",
				Message: "A composite's steps read, list, change files or think: " + string(k) + " cannot be one of them.",
			}
		}
		p := &proposal.Proposal{ID: l.ActionID, Action: proposal.Action{Kind: k, Spelling: string(k)}, Args: l.Operation.Args}
		at := "/operation"
		if it.composite {
			at = "/children/" + strconv.Itoa(i) + "/operation"
		}
		if err := checkPaths(p, at); err != nil {
			return nil, err
		}
		if err := checkDeclared(l, strings.TrimSuffix(at, "/operation")); err != nil {
			return nil, err
		}
		dd := child
		if !it.composite {
			dd = top
		}
		hd := proposal.Describe(p, dd)
		s := step{p: p, desc: hd, risk: higher(hd.RiskLevel, l.RiskLevel)}
		if l.Confirmation.Required {
			s.confirm = "the requester's descriptor asks for confirmation"
			if it.composite {
				s.confirm += " of step " + strconv.Itoa(i+1)
			}
		}
		if it.composite {
			it.says = append(it.says, l.Confirmation.Reason)
		}
		if it.composite {
			if err := readsEarlierChange(i, p, hostLeaves); err != nil {
				return nil, err
			}
		}
		it.steps = append(it.steps, s)
		hostLeaves = append(hostLeaves, hd)
		if hd.Confirmation.Required {
			it.confirm = append(it.confirm, hostThreshold(hd))
		}
		if s.confirm != "" {
			it.confirm = append(it.confirm, s.confirm)
		}
	}
	if it.composite {
		if err := checkDeclared(peer, ""); err != nil {
			return nil, err
		}
		c, err := proposal.Compose(hostLeaves, top)
		if err != nil {
			return nil, &proposal.Error{Code: proposal.ErrValidation, Field: "/children", Rule: "composite", Message: err.Error(), Err: err}
		}
		it.desc = c
		if peer.Confirmation.Required {
			it.confirm = append(it.confirm, "the requester's descriptor asks for confirmation")
		}
	} else {
		it.desc = hostLeaves[0]
		it.action = string(peer.Operation.Action)
	}
	it.risk = higher(it.desc.RiskLevel, peer.RiskLevel)
	it.resources = smaller(it.desc.Resources, peer.Resources)
	it.confirm = proposal.Dedupe(it.confirm)
	it.says = proposal.Dedupe(slices.DeleteFunc(it.says, func(s string) bool { return strings.TrimSpace(s) == "" }))
	it.desc.Audit.LogLevel = e.levels.of(it.risk) // what the host keeps, never the peer's
	return it, nil
}

// checkPaths refuses a path argument of p that the sandbox would refuse
// (sandbox.Normalize: a character that reads as a dot or a slash, a bidi
// override or other invisible formatting, a name not in NFC, …), as a
// validation error naming the field (at is the JSON pointer of the
// arguments' parent: "" for a proposal) and the sandbox's rule. The
// proposal schema's pattern lets such a path through; without this the
// action was judged by the policy, audited as valid, perhaps held for an
// operator to confirm, and refused only by the sandbox, without a field.
func checkPaths(p *proposal.Proposal, at string) *proposal.Error {
	for _, a := range []struct{ name, path string }{
		{"path", p.Args.Path}, {"source", p.Args.Source}, {"destination", p.Args.Destination},
	} {
		if a.path == "" {
			continue
		}
		if err := refusedPath(at+"/args/"+a.name, a.path); err != nil {
			return err
		}
	}
	return nil
}

// checkDeclared refuses, as checkPaths does, a path that d declares (at is
// d's JSON pointer: "" or /children/N) and that the sandbox would refuse:
// its scope, its effects and its preconditions' paths_exist. These may
// hold wildcards (shell globs within one name); see sandboxRefusal. A
// composite's own declarations are checked by a call for it; this one
// does not descend into its children.
func checkDeclared(d *proposal.Descriptor, at string) *proposal.Error {
	fx := d.Effects.Filesystem
	for _, l := range []struct {
		ptr   string
		paths []string
	}{
		{"/scope/filesystem/paths", d.Scope.Filesystem.Paths},
		{"/effects/filesystem/create", fx.Create},
		{"/effects/filesystem/modify", fx.Modify},
		{"/effects/filesystem/delete", fx.Delete},
		{"/preconditions/paths_exist", d.Preconditions.PathsExist},
	} {
		for i, p := range l.paths {
			if err := refusedPath(at+l.ptr+"/"+strconv.Itoa(i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// refusedPath is the validation error for the path p at field when the
// sandbox would refuse it (sandboxRefusal), nil otherwise.
func refusedPath(field, p string) *proposal.Error {
	pe := sandboxRefusal(p)
	if pe == nil {
		return nil
	}
	msg := "Field " + field + " is not a path the sandbox accepts (" + string(pe.Rule) + ")"
	if pe.Detail != "" {
		msg += ": " + pe.Detail
	}
	return &proposal.Error{Code: proposal.ErrValidation, Field: field, Rule: string(pe.Rule), Message: msg + ".", Err: pe}
}

// globChars open a wildcard in a name of a declared path; ']' closes a
// class.
const globChars = "*?["

// sandboxRefusal is the sandbox's refusal of the path p (sandbox.Normalize),
// or nil. A name of p with wildcards (a descriptor's scope, effects and
// paths_exist allow them; a proposal's path has none) is checked as a name
// it could match: its wildcard characters stand for an ordinary letter,
// every other character stays as it is, so a lookalike or a bidi override
// is refused wherever it is, a class included ([a\u202e] can only add a
// name the sandbox refuses), as are a reserved prefix or a space at either
// end written literally. A class lists alternatives, so a wildcard name
// may be longer than the names it matches: the sandbox's lengths are then
// held against the literal names only, each wildcard name's characters
// checked on their own.
func sandboxRefusal(p string) *sandbox.PathError {
	if !strings.ContainsAny(p, globChars) {
		return normalizeRefusal(p)
	}
	segs := strings.Split(p, "/")
	wild := make([]bool, len(segs))
	asName := make([]string, len(segs))
	for i, s := range segs {
		asName[i] = s
		if strings.ContainsAny(s, globChars) {
			wild[i] = true
			// Byte for byte, so that the refusal's offsets are p's.
			b := []byte(s)
			for j, c := range b {
				if strings.IndexByte(globChars+"]", c) >= 0 {
					b[j] = 'x'
				}
			}
			asName[i] = string(b)
		}
	}
	pe := normalizeRefusal(strings.Join(asName, "/"))
	if pe == nil || pe.Rule != sandbox.RuleTooLong {
		if pe != nil {
			pe.Path = p
		}
		return pe
	}
	// Too long, perhaps only for its classes: each wildcard name's
	// characters on their own, then the path with each wildcard name one
	// letter long. The offsets would be another path's: only the rule and
	// the character are said.
	short := slices.Clone(asName)
	for i, s := range asName {
		if !wild[i] {
			continue
		}
		if pe := normalizeRefusal(sandbox.Prefix + "x" + s); pe != nil && pe.Rule != sandbox.RuleTooLong {
			return withoutOffset(pe, p)
		}
		short[i] = "x"
	}
	if pe := normalizeRefusal(strings.Join(short, "/")); pe != nil {
		return withoutOffset(pe, p)
	}
	return nil
}

// normalizeRefusal is sandbox.Normalize's refusal of p, or nil.
func normalizeRefusal(p string) *sandbox.PathError {
	var pe *sandbox.PathError
	if _, err := sandbox.Normalize(p); errors.As(err, &pe) {
		return pe
	}
	return nil
}

// withoutOffset is pe for the path p, its detail without the byte offset
// ("byte 12 '\u202e'" says the character only).
func withoutOffset(pe *sandbox.PathError, p string) *sandbox.PathError {
	out := *pe
	out.Path = p
	if rest, ok := strings.CutPrefix(out.Detail, "byte "); ok {
		if _, char, ok := strings.Cut(rest, " "); ok {
			out.Detail = char
		} else {
			out.Detail = ""
		}
	}
	return &out
}

// readsEarlierChange refuses step i of a composite, p, when it reads or
// lists what one of the earlier steps (their host descriptors, earlier)
// changes. Every read and list of a composite sees the workspace as it
// was before the composite, none what an earlier step staged: such a read
// would show what the promotion then replaces.
func readsEarlierChange(i int, p *proposal.Proposal, earlier []*proposal.Descriptor) error {
	k := p.Action.Kind
	if k != proposal.KindReadFile && k != proposal.KindListFiles {
		return nil
	}
	target := p.Args.Path
	for j, d := range earlier {
		fx := d.Effects.Filesystem
		for _, changed := range slices.Concat(fx.Create, fx.Modify, fx.Delete) {
			seen := changed == target
			if k == proposal.KindListFiles {
				// The listing's entries: what lies directly in the directory.
				seen = seen || path.Dir(changed)+"/" == strings.TrimSuffix(target, "/")+"/"
			}
			if seen {
				return &proposal.Error{
					Code: proposal.ErrValidation, Field: "/children/" + strconv.Itoa(i) + "/operation/args/path", Rule: "compositeReadAfterChange",
					Message: fmt.Sprintf("Step %d %s %s, which step %d changes: the reads of a composite see the workspace as it was before it, "+
						"so read before the change, or in an action of its own after this one.", i+1, verb(k), target, j+1),
				}
			}
		}
	}
	return nil
}

func verb(k proposal.Kind) string {
	if k == proposal.KindListFiles {
		return "lists"
	}
	return "reads"
}

// hostThreshold is the host's reason to confirm an action whose risk
// reaches the operator's threshold.
func hostThreshold(d *proposal.Descriptor) string {
	return "host: " + string(d.RiskLevel) + " risk needs confirmation"
}

// maxReasonPaths bounds the paths a confirmation reason names.
const maxReasonPaths = 8

// confirmReason is what an operator is told about an action held for
// confirmation, built from what the host knows for a fact: the action,
// the paths, the risk, the size of the staged changes (diffs), then why
// it is held (the host's and the policy's reasons, when d asks for
// confirmation). A peer descriptor's
// own words (its intent_summary and confirmation.reason) come last, under
// RequesterLabel, made safe by RequesterWords: a requester may say what
// it likes, but never in the host's voice.
func (it *item) confirmReason(d policy.Decision, diffs []sandbox.Diff) string {
	var b strings.Builder
	if it.composite {
		kinds := make([]string, len(it.steps))
		for i, s := range it.steps {
			kinds[i] = string(s.p.Action.Kind)
		}
		fmt.Fprintf(&b, "%s of %d steps (%s)", proposal.TypeMultiStepComposite, len(it.steps), strings.Join(kinds, ", "))
	} else {
		b.WriteString(string(it.steps[0].p.Action.Kind))
	}
	if ps := it.paths(); len(ps) > 0 {
		more := ""
		if len(ps) > maxReasonPaths {
			ps, more = ps[:maxReasonPaths], fmt.Sprintf(" and %d more", len(ps)-maxReasonPaths)
		}
		fmt.Fprintf(&b, " on %s%s", strings.Join(ps, ", "), more)
	}
	fmt.Fprintf(&b, "; risk %s; %s.", it.risk, diffSize(diffs))
	if why := reasonText(d); why != "" && d.Effect == policy.Confirm {
		b.WriteString(" Held because: " + why + ".")
	}
	if len(it.says) > 0 {
		b.WriteString(" " + quoteWords(strings.Join(it.says, " / ")))
	}
	return b.String()
}

// diffSize says how much diffs change: the paths, the lines of text added
// and removed, and the bytes of the files before and after.
func diffSize(diffs []sandbox.Diff) string {
	if len(diffs) == 0 {
		return "no change to the workspace"
	}
	var added, removed int
	var before, after int64
	for _, d := range diffs {
		for _, l := range strings.Split(d.Unified, "\n") {
			switch {
			case strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- "):
			case strings.HasPrefix(l, "+"):
				added++
			case strings.HasPrefix(l, "-"):
				removed++
			}
		}
		before += d.Before.Size
		after += d.After.Size
	}
	paths := "paths"
	if len(diffs) == 1 {
		paths = "path"
	}
	return fmt.Sprintf("changes %d %s: +%d -%d lines; files %d -> %d bytes", len(diffs), paths, added, removed, before, after)
}

// hasEffects reports whether the item changes the workspace.
func (it *item) hasEffects() bool {
	return slices.ContainsFunc(it.steps, func(s step) bool { return changesFiles(s.p.Action.Kind) })
}

// changes are the sandbox changes of the item's steps, in order, and the
// bytes they write.
func (it *item) changes() ([]sandbox.Change, int64) {
	var cs []sandbox.Change
	var n int64
	for _, s := range it.steps {
		a := s.p.Args
		switch s.p.Action.Kind {
		case proposal.KindWriteFile:
			cs = append(cs, sandbox.Write{Path: a.Path, Content: []byte(a.Content), Parents: true})
			n += int64(len(a.Content))
		case proposal.KindCreateDirectory:
			cs = append(cs, sandbox.Mkdir{Path: a.Path})
		case proposal.KindDeleteFile:
			cs = append(cs, sandbox.Delete{Path: a.Path})
		case proposal.KindRenameFile:
			cs = append(cs, sandbox.Rename{From: a.Source, To: a.Destination})
		}
	}
	return cs, n
}

// effects are the effects the host declares for the item: exactly what
// its operations do (a peer descriptor was checked to declare no less and
// no more, its wildcards included).
func (it *item) effects() sandbox.Effects {
	fx := it.desc.Effects.Filesystem
	return sandbox.Effects{Create: fx.Create, Modify: fx.Modify, Delete: fx.Delete}
}

// paths are every path the item touches, once each, in order.
func (it *item) paths() []string {
	var ps []string
	for _, s := range it.steps {
		ps = append(ps, s.p.Paths()...)
	}
	return proposal.Dedupe(ps)
}

// changedPaths are the paths of the item's steps that change the
// workspace (both of a rename), once each: the resources the rollback
// cooldown is kept for. Nil for an item without effects.
func (it *item) changedPaths() []string {
	var ps []string
	for _, s := range it.steps {
		if changesFiles(s.p.Action.Kind) {
			ps = append(ps, s.p.Paths()...)
		}
	}
	return proposal.Dedupe(ps)
}

// requests are the policy requests that judge the item: one per step,
// and for a composite one for the whole first.
func (it *item) requests(requester string, operator, recentlyRolledBack bool) []policy.Request {
	base := policy.Request{
		Principal: requester, Operator: operator,
		RollbackSupported: it.desc.Rollback.Supported, RecentlyRolledBack: recentlyRolledBack,
	}
	var rs []policy.Request
	if it.composite {
		r := base
		r.Action, r.Paths, r.Risk = policy.ActionComposite, it.paths(), string(it.risk)
		_, r.Size = it.changes()
		rs = append(rs, r)
	}
	for _, s := range it.steps {
		r := base
		r.Action, r.Paths, r.Risk = string(s.p.Action.Kind), s.p.Paths(), string(s.risk)
		r.RollbackSupported = s.desc.Rollback.Supported
		if !it.composite {
			r.Risk = string(it.risk)
		}
		if s.p.Action.Kind == proposal.KindWriteFile {
			r.Size = int64(len(s.p.Args.Content))
		}
		rs = append(rs, r)
	}
	// What a peer's paths_exist looks at: the folder it lists or looks
	// into, judged as a listing of it (its answer, the action run or
	// PRECONDITION_FAILED, tells what a listing would). One an earlier
	// step of a composite settles is not looked at.
	for _, pc := range it.pre {
		if pc.name != precondPathsExist {
			continue
		}
		if settled, _ := earlierStep(it, pc); settled {
			continue
		}
		r := base
		r.Action, r.Paths, r.Risk, r.RollbackSupported = policy.ActionListFiles, []string{lookedInto(pc.path)}, policy.RiskLow, true
		rs = append(rs, r)
	}
	return rs
}

// lookedInto is the folder a paths_exist pattern (a /sandbox/ path whose
// names may hold wildcards) is checked in, as a virtual path: the
// directory above its first name with a wildcard (which is listed), or
// above the path itself when it has none (where its name is looked up).
// A pattern's wildcards may reach folders below it too: those are judged
// as the check reaches them (checkPreconditions).
func lookedInto(pattern string) string {
	rel := strings.TrimPrefix(pattern, sandbox.Prefix)
	if i := strings.IndexAny(rel, globChars); i >= 0 {
		rel = rel[:i]
	}
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return sandbox.Virtual(rel[:i])
	}
	return sandbox.Prefix
}

// changesFiles reports whether an action of kind k changes the workspace.
func changesFiles(k proposal.Kind) bool {
	switch k {
	case proposal.KindWriteFile, proposal.KindCreateDirectory, proposal.KindDeleteFile, proposal.KindRenameFile:
		return true
	}
	return false
}

func higher(a, b proposal.Risk) proposal.Risk {
	if b != "" && b.AtLeast(a) {
		return b
	}
	return a
}

// smaller returns the host's caps lowered to the peer's where the peer
// asks for less.
func smaller(host, peer proposal.Resources) proposal.Resources {
	low := func(h, p int64) int64 {
		if p > 0 && p < h {
			return p
		}
		return h
	}
	return proposal.Resources{
		MaxCPUMillis:      low(host.MaxCPUMillis, peer.MaxCPUMillis),
		MaxMemoryMB:       low(host.MaxMemoryMB, peer.MaxMemoryMB),
		MaxDiskMB:         low(host.MaxDiskMB, peer.MaxDiskMB),
		MaxDurationMillis: low(host.MaxDurationMillis, peer.MaxDurationMillis),
	}
}
