package policy

import (
	"slices"
	"strconv"
	"strings"
)

// Actions a Request may name. Lower-case spellings (read_file, as a
// proposal may spell them; see schemas/proposal.v1.json) are the same
// actions: the engine upper-cases Request.Action before judging it.
const (
	ActionThink           = "THINK"
	ActionFinish          = "FINISH"
	ActionReadFile        = "READ_FILE"
	ActionListFiles       = "LIST_FILES"
	ActionWriteFile       = "WRITE_FILE"
	ActionCreateDirectory = "CREATE_DIRECTORY"
	ActionDeleteFile      = "DELETE_FILE"
	ActionRenameFile      = "RENAME_FILE"
	ActionComposite       = "MULTI_STEP_COMPOSITE"
)

// Risk levels of the action descriptor (risk_level in
// schemas/action-descriptor.v1.json), lowest first.
const (
	RiskLow      = "LOW"
	RiskMedium   = "MEDIUM"
	RiskHigh     = "HIGH"
	RiskCritical = "CRITICAL"
)

// SandboxRoot is the prefix every path must carry. The workspace itself is
// "/sandbox/"; "/sandbox" without the slash is outside it.
const SandboxRoot = "/sandbox/"

// MaxPathLen is the longest path, in bytes, the engine judges (Linux's
// PATH_MAX); a longer one fails RuleWellFormed.
const MaxPathLen = 4096

// Request is what the engine judges: who proposes which action on which
// paths, with the facts the host derived from the proposal's descriptor.
// It is deliberately independent of the proposal and descriptor types.
type Request struct {
	// Principal is the proposer's identity, a P2TR address (bc1p…, tb1p…).
	// The engine treats it as an opaque non-empty string.
	Principal string
	// Operator is true when the principal has the operator role.
	Operator bool
	// Action is one of the Action constants, in any case.
	Action string
	// Paths are the /sandbox/… paths the action touches: none for THINK
	// and FINISH, two for RENAME_FILE (source, destination), one for the
	// other file actions, any number for MULTI_STEP_COMPOSITE.
	Paths []string
	// Risk is LOW, MEDIUM, HIGH or CRITICAL, in any case.
	Risk string
	// Size is the number of bytes the action writes (0 when it writes none).
	Size int64
	// RollbackSupported says the host can undo the action. Actions with no
	// effect (THINK, FINISH, reads) are trivially undoable: set it true.
	RollbackSupported bool
	// RecentlyRolledBack is true when the action changes a path that a
	// rollback restored within the cooldown, whoever proposed the action
	// rolled back and whoever proposes this one.
	RecentlyRolledBack bool
}

// Effect is the outcome of a decision. The zero value is Deny, and the
// constants are ordered from the strictest: Deny < Confirm < Permit.
type Effect int

// The three effects of a decision on a descriptor, after validation, policy
// and sandbox: block, require confirmation, promote.
const (
	Deny Effect = iota
	Confirm
	Permit
)

// String returns "deny", "confirm" or "permit".
func (e Effect) String() string {
	switch e {
	case Deny:
		return "deny"
	case Confirm:
		return "confirm"
	case Permit:
		return "permit"
	}
	return "effect(" + strconv.Itoa(int(e)) + ")"
}

// Identifiers in Decision.DecidedBy for the host rules, which no operator
// policy can override. Operator policies are named by their @id annotation
// or "policy<N>" (N counts from 0 in the file); no policy may take an id
// starting with "host:".
const (
	// RuleWellFormed denies a request the engine cannot judge: no
	// principal, an unknown action or risk, a negative size, a path longer
	// than MaxPathLen, or a number of paths that does not fit the action.
	RuleWellFormed = "host:well-formed"
	// RuleSandboxOnly denies any path that is not a clean path under
	// /sandbox/ (no "." or ".." segment, no empty segment, no control
	// character, valid UTF-8).
	RuleSandboxOnly = "host:sandbox-only"
	// RuleRollbackRequired denies an action whose rollback is not
	// supported: an action that cannot be rolled back is blocked whatever
	// the policy says.
	RuleRollbackRequired = "host:rollback-required"
	// RuleCriticalBlocked denies CRITICAL risk (the descriptor's risk levels
	// let a policy block it; snapnode always does).
	RuleCriticalBlocked = "host:critical-blocked"
	// RuleHighRiskSandbox marks HIGH and CRITICAL actions as needing the
	// sandbox (Decision.Sandbox). It never changes the effect.
	RuleHighRiskSandbox = "host:high-risk-sandbox"
	// RuleRollbackCooldown lowers Permit to Confirm for an action that
	// changes a path restored by a rollback within the cooldown.
	RuleRollbackCooldown = "host:rollback-cooldown"
	// RuleEvaluation denies when the judgement itself failed: the context
	// was done, or the evaluator panicked.
	RuleEvaluation = "host:evaluation"
	// DenyByDefault names the decision when no policy permits the request.
	DenyByDefault = "deny-by-default"
)

// Decision is the engine's judgement of one Request.
type Decision struct {
	// Effect is Permit (promote), Confirm (an operator must approve) or
	// Deny (block).
	Effect Effect
	// Reasons say in words why, each naming the host rule or the policy
	// (by id and file:line:column) that decided. Reasons for the effect
	// come first; the sandbox note, when set and not denied, comes last.
	Reasons []string
	// DecidedBy are the host rule and policy ids behind Reasons, without
	// duplicates, for the audit log and for tests.
	DecidedBy []string
	// Sandbox is true when the host rules require the sandbox (HIGH and
	// CRITICAL risk). The executor sandboxes every action anyway.
	Sandbox bool
	// PolicyVersion identifies the operator policy text that judged:
	// the first 16 hex digits of its SHA-256.
	PolicyVersion string
}

// Combine merges the decisions on the children of a MULTI_STEP_COMPOSITE
// (and on the composite itself) into one: the strictest effect wins, so any
// denied child blocks the whole, and any child needing confirmation makes
// the whole need it. Reasons and DecidedBy of the children that set the
// final effect are kept, in order, without duplicates; Sandbox is true if
// any child needs it. PolicyVersion is the first non-empty one. Combine of
// nothing is a Deny.
func Combine(ds ...Decision) Decision {
	out := Decision{Effect: Permit}
	if len(ds) == 0 {
		return Decision{Effect: Deny, Reasons: []string{"nothing to decide"}, DecidedBy: []string{RuleWellFormed}}
	}
	for _, d := range ds {
		out.Effect = min(out.Effect, d.Effect)
		out.Sandbox = out.Sandbox || d.Sandbox
		if out.PolicyVersion == "" {
			out.PolicyVersion = d.PolicyVersion
		}
	}
	for _, d := range ds {
		if d.Effect != out.Effect {
			continue
		}
		out.Reasons = appendNew(out.Reasons, d.Reasons...)
		out.DecidedBy = appendNew(out.DecidedBy, d.DecidedBy...)
	}
	return out
}

// appendNew appends the values of add not already in dst.
func appendNew(dst []string, add ...string) []string {
	for _, s := range add {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// knownAction reports whether a (upper-cased) action is one the engine
// judges, and how many paths it takes (-1: any number).
func knownAction(a string) (paths int, ok bool) {
	switch a {
	case ActionThink, ActionFinish:
		return 0, true
	case ActionReadFile, ActionListFiles, ActionWriteFile, ActionCreateDirectory, ActionDeleteFile:
		return 1, true
	case ActionRenameFile:
		return 2, true
	case ActionComposite:
		return -1, true
	}
	return 0, false
}

// riskRank orders the risk levels from 1 (LOW) to 4 (CRITICAL); 0 is
// unknown.
func riskRank(r string) int64 {
	switch r {
	case RiskLow:
		return 1
	case RiskMedium:
		return 2
	case RiskHigh:
		return 3
	case RiskCritical:
		return 4
	}
	return 0
}

// normalise upper-cases the action and risk.
func normalise(r Request) Request {
	r.Action = strings.ToUpper(r.Action)
	r.Risk = strings.ToUpper(r.Risk)
	return r
}
