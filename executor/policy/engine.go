package policy

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/readfile"
)

//go:embed default.cedar
var defaultPolicy []byte

// DefaultName is the file name the built-in policy reports in positions.
const DefaultName = "default.cedar"

// Annotations the engine reads on a policy.
const (
	annotID      = "id"      // the policy's id, unique in the file
	annotReason  = "reason"  // why it exists, quoted in Reasons
	annotConfirm = "confirm" // on a permit: grants only with confirmation
)

// Engine judges requests by the host rules and one Cedar policy text. It
// is immutable once built and safe for concurrent use; to change policy,
// build a new Engine and swap it in a Holder.
type Engine struct {
	name    string
	version string
	set     *cedar.PolicySet
	meta    map[cedar.PolicyID]*policyMeta
	static  cedar.EntityMap
}

// policyMeta is what the engine reports about one Cedar policy.
type policyMeta struct {
	id          string
	forbid      bool
	at          string // file:line:column, the file by the name shown to peers (see Load)
	index       int    // its place in the file's list of policies
	offset      int
	reason      string
	confirm     bool
	confirmText string
}

// MaxFileBytes bounds a policy file that Load reads: a longer one, or one
// that is not a regular file (a FIFO would make the read wait for a
// writer), is refused.
const MaxFileBytes = 4 << 20

// Load reads a Cedar policy file and parses it as Parse does. Its errors
// name the file by path, for the operator who loads it; the positions in
// decisions' reasons name it by its base name alone, since those reasons
// reach the peers whose requests they decide, who have no business
// learning the node's folders or its user's name.
func Load(path string, opts ...Option) (*Engine, error) {
	src, err := readfile.Regular(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return parse(path, filepath.Base(path), src, opts)
}

// Option is an option of Load and Parse.
type Option func(*options)

type options struct {
	network identity.Network
}

// WithNetwork gives the network of the node the policy judges requests
// for; without it, that is identity.Mainnet, as a node's is unless it
// runs on testnet. A request's principal is an address of the node's
// network, so an Agent literal of the other one (tb1p… on mainnet, bc1p…
// on testnet or signet) would never match, and a forbid naming it would
// guard nothing: the text is refused.
func WithNetwork(n identity.Network) Option {
	return func(o *options) { o.network = n }
}

// Default returns an Engine with the built-in policy (default.cedar).
func Default() *Engine {
	e, err := Parse(DefaultName, defaultPolicy)
	if err != nil {
		panic("policy: built-in default.cedar does not parse: " + err.Error())
	}
	return e
}

// Parse builds an Engine from Cedar policy text; name is used in errors and
// positions. A text with no policy is valid and denies everything. Errors
// are *ParseError (errors.Is(err, ErrInvalidPolicy)) naming name, line and
// column.
func Parse(name string, src []byte, opts ...Option) (*Engine, error) {
	return parse(name, name, src, opts)
}

// parse is Parse naming the text name in errors and shown in positions.
func parse(name, shown string, src []byte, opts []Option) (*Engine, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	list, err := cedar.NewPolicyListFromBytes(name, src)
	if err != nil {
		return nil, syntaxError(name, src, err)
	}
	sum := sha256.Sum256(src)
	e := &Engine{
		name:    name,
		version: hex.EncodeToString(sum[:8]),
		set:     cedar.NewPolicySet(),
		meta:    make(map[cedar.PolicyID]*policyMeta, len(list)),
		static:  staticEntities(),
	}
	for i, p := range list {
		pos := p.Position()
		bad := func(format string, args ...any) *ParseError {
			return &ParseError{File: name, Line: pos.Line, Column: pos.Column, Msg: fmt.Sprintf(format, args...)}
		}
		ann := p.Annotations()
		for k := range ann {
			switch k {
			case annotID, annotReason, annotConfirm:
			default:
				// A misspelt @confirm would grant without confirmation.
				return nil, bad("unknown annotation @%s (known: @%s, @%s, @%s)", k, annotID, annotReason, annotConfirm)
			}
		}
		id := fmt.Sprintf("policy%d", i)
		if v, ok := ann[annotID]; ok {
			id = string(v)
		}
		switch {
		case id == "":
			return nil, bad("empty @id")
		case strings.HasPrefix(id, "host:") || id == DenyByDefault:
			return nil, bad("@id %q is reserved for the host", id)
		case e.meta[cedar.PolicyID(id)] != nil:
			first := list[e.meta[cedar.PolicyID(id)].index].Position()
			return nil, bad("duplicate @id %q (first at %s:%d:%d)", id, name, first.Line, first.Column)
		}
		if err := checkRefs(p, o.network); err != nil {
			pe := bad("%v", err)
			if errors.Is(err, ErrOtherNetwork) {
				pe.Err = ErrOtherNetwork
			}
			return nil, pe
		}
		confirmText, confirm := ann[annotConfirm]
		if confirm && p.Effect() == cedar.Forbid {
			return nil, bad("@confirm on a forbid policy means nothing: forbid always denies")
		}
		m := &policyMeta{
			id:          id,
			forbid:      p.Effect() == cedar.Forbid,
			at:          fmt.Sprintf("%s:%d:%d", shown, pos.Line, pos.Column),
			index:       i,
			offset:      pos.Offset,
			reason:      string(ann[annotReason]),
			confirm:     confirm,
			confirmText: string(confirmText),
		}
		e.meta[cedar.PolicyID(id)] = m
		e.set.Add(cedar.PolicyID(id), p)
	}
	return e, nil
}

// Name is the file name the engine was built from.
func (e *Engine) Name() string { return e.name }

// Version identifies the policy text: the first 16 hex digits of its
// SHA-256. It is Decision.PolicyVersion.
func (e *Engine) Version() string { return e.version }

// Len is the number of policies in the text.
func (e *Engine) Len() int { return len(e.meta) }

// Decide judges r: the host rules first, then, unless they deny, the
// Cedar policy on each path. It never fails: a nil Engine, a done ctx or a
// panic in the evaluator all give a Deny naming RuleEvaluation.
func (e *Engine) Decide(ctx context.Context, r Request) (d Decision) {
	if e == nil {
		return failed("", "no policy loaded")
	}
	defer func() {
		if p := recover(); p != nil {
			d = failed(e.version, fmt.Sprintf("policy evaluation panicked: %v", p))
		}
	}()
	if err := ctx.Err(); err != nil {
		return failed(e.version, "not judged: "+err.Error())
	}
	return e.judge(r, false).decision
}

// failed is the Deny for a judgement that could not be made.
func failed(version, why string) Decision {
	return Decision{Effect: Deny, Reasons: []string{RuleEvaluation + ": " + why},
		DecidedBy: []string{RuleEvaluation}, PolicyVersion: version}
}

// trace is everything a judgement found, for Decide and Explain.
type trace struct {
	req      Request // normalised
	host     []check
	hostDeny bool
	paths    []pathResult // empty when the host denied and !full
	decision Decision
}

// pathResult is the Cedar outcome on one resource.
type pathResult struct {
	resource string
	effect   Effect
	permits  []*policyMeta // matching permits, in text order
	forbids  []*policyMeta // matching forbids, in text order
	errs     []evalError
}

type evalError struct {
	meta *policyMeta
	msg  string
}

// failedConfirm reports whether x is the failure of a @confirm permit.
func failedConfirm(x evalError) bool { return !x.meta.forbid && x.meta.confirm }

// judge evaluates r. With full, the Cedar policy is evaluated even when a
// host rule other than RuleWellFormed denies, for Explain.
func (e *Engine) judge(r Request, full bool) trace {
	t := trace{req: normalise(r)}
	t.host = hostChecks(t.req)
	wellFormed := true
	for _, c := range t.host {
		t.hostDeny = t.hostDeny || c.effect == Deny
		wellFormed = wellFormed && (c.rule != RuleWellFormed || c.effect != Deny)
	}
	if !t.hostDeny || (full && wellFormed) {
		t.paths = e.evaluate(t.req)
	}
	t.decision = e.decide(&t)
	return t
}

// evaluate runs the Cedar policy on each path of r (on SandboxRoot when r
// has none).
func (e *Engine) evaluate(r Request) []pathResult {
	resources := r.Paths
	if len(resources) == 0 {
		resources = []string{SandboxRoot}
	}
	es := &entities{static: e.static, principal: principalEntity(r)}
	req := cedar.Request{
		Principal: es.principal.UID,
		Action:    cedar.NewEntityUID(typeAction, cedar.String(r.Action)),
		Context: cedar.NewRecord(cedar.RecordMap{
			"risk":               cedar.String(r.Risk),
			"riskLevel":          cedar.Long(riskRank(r.Risk)),
			"size":               cedar.Long(r.Size),
			"rollbackSupported":  cedar.Boolean(r.RollbackSupported),
			"recentlyRolledBack": cedar.Boolean(r.RecentlyRolledBack),
		}),
	}
	out := make([]pathResult, 0, len(resources))
	for _, p := range resources {
		es.setResource(p)
		req.Resource = es.resource.UID
		_, diag := cedar.Authorize(e.set, es, req)
		res := pathResult{resource: p}
		for _, rs := range diag.Reasons {
			m := e.meta[rs.PolicyID]
			if m.forbid {
				res.forbids = append(res.forbids, m)
			} else {
				res.permits = append(res.permits, m)
			}
		}
		for _, de := range diag.Errors {
			res.errs = append(res.errs, evalError{meta: e.meta[de.PolicyID], msg: de.Message})
		}
		byOffset := func(a, b *policyMeta) int { return cmp.Compare(a.offset, b.offset) }
		slices.SortFunc(res.permits, byOffset)
		slices.SortFunc(res.forbids, byOffset)
		slices.SortFunc(res.errs, func(a, b evalError) int { return byOffset(a.meta, b.meta) })
		switch {
		case len(res.forbids) > 0 || slices.ContainsFunc(res.errs, func(x evalError) bool { return x.meta.forbid }):
			res.effect = Deny
		case slices.ContainsFunc(res.permits, func(m *policyMeta) bool { return m.confirm }),
			len(res.permits) > 0 && slices.ContainsFunc(res.errs, failedConfirm):
			// A failing @confirm permit grants nothing, but what other
			// permits grant still needs the confirmation it asks for.
			res.effect = Confirm
		case len(res.permits) > 0:
			res.effect = Permit
		default:
			res.effect = Deny
		}
		out = append(out, res)
	}
	return out
}

// decide turns a trace into the Decision.
func (e *Engine) decide(t *trace) Decision {
	d := Decision{PolicyVersion: e.version}
	var sandbox, cooldown *check
	for i := range t.host {
		switch c := &t.host[i]; {
		case c.flag:
			sandbox = c
		case c.effect == Confirm:
			cooldown = c
		}
	}
	d.Sandbox = sandbox != nil
	add := func(id, reason string) {
		d.Reasons = appendNew(d.Reasons, reason)
		d.DecidedBy = appendNew(d.DecidedBy, id)
	}
	if t.hostDeny {
		d.Effect = Deny
		for _, c := range t.host {
			if c.effect == Deny {
				add(c.rule, c.rule+": "+c.reason)
			}
		}
		return d
	}

	d.Effect = Permit
	for _, p := range t.paths {
		d.Effect = min(d.Effect, p.effect)
	}
	if cooldown != nil && d.Effect == Permit {
		d.Effect = Confirm
	}
	if cooldown != nil && d.Effect == Confirm {
		add(cooldown.rule, cooldown.rule+": "+cooldown.reason)
	}
	on := func(p pathResult) string { return t.req.Action + " on " + p.resource }
	for _, p := range t.paths {
		switch {
		case d.Effect == Deny && p.effect == Deny:
			for _, m := range p.forbids {
				add(m.id, m.describe("forbids "+on(p)))
			}
			failed := false
			for _, x := range p.errs {
				if x.meta.forbid {
					failed = true
					add(x.meta.id, fmt.Sprintf("policy %q at %s failed on %s, and a forbid that fails denies: %s",
						x.meta.id, x.meta.at, p.resource, x.msg))
				}
			}
			if len(p.forbids) == 0 && !failed {
				add(DenyByDefault, "no policy permits "+on(p)+" (deny by default)")
			}
		case d.Effect == Confirm && p.effect == Confirm:
			for _, m := range p.permits {
				if m.confirm {
					add(m.id, m.describe("requires confirmation for "+on(p)))
				}
			}
			for _, x := range p.errs {
				if failedConfirm(x) {
					add(x.meta.id, fmt.Sprintf("policy %q at %s failed on %s, and a @confirm permit that fails still requires confirmation: %s",
						x.meta.id, x.meta.at, p.resource, x.msg))
				}
			}
		case d.Effect == Confirm && p.effect == Permit, d.Effect == Permit:
			for _, m := range p.permits {
				add(m.id, m.describe("permits "+on(p)))
			}
		}
	}
	if sandbox != nil && d.Effect != Deny {
		add(sandbox.rule, sandbox.rule+": "+sandbox.reason)
	}
	return d
}

// describe says what a policy did, quoting its @confirm or @reason text.
func (m *policyMeta) describe(did string) string {
	s := fmt.Sprintf("policy %q at %s %s", m.id, m.at, did)
	switch {
	case m.confirm && m.confirmText != "" && strings.HasPrefix(did, "requires"):
		s += ": " + m.confirmText
	case m.reason != "":
		s += ": " + m.reason
	}
	return s
}
