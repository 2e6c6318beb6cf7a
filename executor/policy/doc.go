// Package policy decides whether a proposed action may run: Permit
// (promote), Confirm (an operator must approve first) or Deny (block),
// with the reasons and the version of the policy that decided.
//
// It knows nothing of proposals, descriptors, SNAP or Nostr: the caller
// fills a Request with the proposer's identity, the action, the paths it
// touches and the facts of its descriptor.
//
//	engine, err := policy.Load("/etc/snapnode/policy.cedar", policy.WithNetwork(identity.Mainnet)) // or policy.Default()
//	if err != nil {
//		return err // *policy.ParseError: "policy.cedar:12:7: …"
//	}
//	d := engine.Decide(ctx, policy.Request{
//		Principal:         "bc1p…", // the proposer's P2TR address
//		Operator:          false,
//		Action:            policy.ActionWriteFile,
//		Paths:             []string{"/sandbox/notes/today.md"},
//		Risk:              policy.RiskMedium,
//		Size:              int64(len(content)),
//		RollbackSupported: true,
//	})
//	switch d.Effect {
//	case policy.Permit: // promote
//	case policy.Confirm: // input_required, with d.Reasons
//	case policy.Deny: // blocked, with d.Reasons
//	}
//
// # Order of judgement
//
// First the host rules, which no operator policy can override (the action
// descriptor's rules, schemas/action-descriptor.v1.json and
// docs/security.md); every one is checked and every failing one is named in
// Reasons:
//
//   - RuleWellFormed: a principal, a known action (THINK, FINISH,
//     READ_FILE, LIST_FILES, WRITE_FILE, CREATE_DIRECTORY, DELETE_FILE,
//     RENAME_FILE, MULTI_STEP_COMPOSITE, in any case), a known risk, a
//     size ≥ 0, and as many paths as the action takes; else Deny.
//   - RuleSandboxOnly: every path is a clean path under /sandbox/ (no "."
//     or ".." segment, no "//", no control character); else Deny.
//   - RuleRollbackRequired: rollback unsupported → Deny ("auto-blocked").
//   - RuleCriticalBlocked: CRITICAL risk → Deny. The descriptor's risk
//     levels let a policy block CRITICAL; snapnode's core has no CRITICAL
//     action, so the host always blocks it rather than leave it to a policy
//     file.
//   - RuleHighRiskSandbox: HIGH or CRITICAL → Decision.Sandbox, a flag
//     that never changes the effect (the executor sandboxes every action).
//   - RuleRollbackCooldown: an action that changes a path a rollback
//     restored within the cooldown (whoever proposes it) is at most
//     Confirm.
//
// If none denies, the operator's Cedar policy judges each path alone, and
// the strictest outcome wins: every path of a RENAME_FILE (source and
// destination) must be permitted. Cedar's rules hold: deny by default, and
// a forbid that matches beats any permit. Two additions:
//
//   - A permit annotated @confirm("why") grants only with confirmation.
//     If any matching permit carries @confirm, the outcome is Confirm, even
//     when a plain permit also matches: confirmation beats a plain permit.
//   - A forbid whose evaluation fails (say it reads a context attribute
//     that is not there) denies, where Cedar would skip it: a broken forbid
//     must not open a hole. A failing permit grants nothing, as in Cedar;
//     a failing permit annotated @confirm also keeps its confirmation:
//     what other permits grant on that path is Confirm, not Permit (the
//     proposer chooses the size that might make its condition fail).
//
// Decision.Reasons name what decided: a host rule ("host:sandbox-only:
// outside /sandbox/: …"), a policy by its @id (or "policy<N>", N counting
// from 0) with its file:line:column and its @confirm or @reason text, or
// "no policy permits … (deny by default)". Decision.DecidedBy has the
// same ids alone. Decision.PolicyVersion is the first 16 hex digits of
// the SHA-256 of the policy text.
//
// # What a policy sees
//
//	principal  Agent::"bc1p…"; its parent is Role::"operator" when
//	           Request.Operator is true.
//	action     Action::"WRITE_FILE" etc. READ_FILE and LIST_FILES are in
//	           Action::"read", WRITE_FILE and CREATE_DIRECTORY in
//	           Action::"write", DELETE_FILE and RENAME_FILE in
//	           Action::"destructive".
//	resource   Path::"/sandbox/…", one path at a time; Path::"/sandbox/"
//	           for THINK and FINISH, which touch none.
//	context    risk (String "LOW"…"CRITICAL"), riskLevel (Long 1…4),
//	           size (Long, bytes written), rollbackSupported (Bool),
//	           recentlyRolledBack (Bool).
//
// Paths form a hierarchy by their text alone, built for each request: the
// parents of a Path are every directory above it, written with a trailing
// slash, and the path's own directory form. So `resource in
// Path::"/sandbox/docs/"` is true for "/sandbox/docs", "/sandbox/docs/"
// and everything below them, and false for "/sandbox/docs-old/a.md":
//
//	// Agents may write under docs/ without asking; nothing else is
//	// written, and nobody touches secrets/, whatever else is permitted.
//	@id("docs")
//	permit (principal, action in Action::"write", resource in Path::"/sandbox/docs/");
//
//	@id("operators-delete") @confirm("an operator deletes: another must confirm")
//	permit (principal in Role::"operator", action == Action::"DELETE_FILE", resource);
//
//	@id("no-secrets") @reason("secrets/ is off limits")
//	forbid (principal, action, resource in Path::"/sandbox/secrets/");
//
// Parse refuses, as a *ParseError with file, line and column: Cedar syntax
// errors, two policies with one @id, an @id starting with "host:" or equal
// to DenyByDefault, @confirm on a forbid, and what Cedar accepts but would
// silently never match: an annotation other than @id, @reason and
// @confirm (a misspelt @Confirm would grant without confirmation), an
// unknown entity type, action or role (in a literal or after `is`), a
// context attribute other than those above, and any attribute of
// principal, action or resource, which have none (`resource has owner`
// is always false), a Path without its trailing slash after `in`
// (`resource in Path::"/sandbox/secrets"` holds for that path alone, not
// for what lies below it) or with it after `==` (`resource ==
// Path::"/sandbox/secrets/"` never holds: no request's path ends in a
// slash, but /sandbox/ itself), an Agent that is not a P2TR address as
// requests carry it (an uppercase address, valid bech32 as it is, or a
// mistyped one is nobody's) or an address of another network than the
// node's (WithNetwork: a tb1p… address on a mainnet node, a bc1p… one on
// a testnet or signet node, is nobody's there), and a Path no request
// can carry: one
// outside /sandbox/ other than "/" (the host denies those first; paths
// are case-sensitive, so Path::"/Sandbox/secrets/" holds nothing), one
// not in Unicode NFC (a name copied in decomposed form, "cafe" and
// U+0301, would never match the NFC "café" the sandbox acts on), one
// under /sandbox/ with an empty, "." or ".." segment, and one the sandbox
// refuses (an invisible or bidi character such as a zero-width space or a
// soft hyphen, a look-alike of '.' or '/', a name starting with the
// sandbox's reserved prefix): a forbid on it, its odd character unseen in
// an editor, would guard nothing. A path is literal: * ? [ and ] are characters a
// file name may hold, never a wildcard (Path::"/sandbox/*.key" names the
// file called "*.key" alone).
//
// # The default policy
//
// Default() is the built-in default.cedar, for a node whose operator gives
// no policy: THINK, FINISH, reads and listing for anyone; writes and
// directory creation for anyone up to 1 MiB, larger ones with confirmation
// unless the principal is an operator; DELETE_FILE and RENAME_FILE with
// confirmation for everyone, operators included (an operator's key in an
// agent's hands should not delete unasked, and another operator or the
// host confirms); MULTI_STEP_COMPOSITE permitted as such, since its
// children are judged one by one and combined with Combine.
//
// # Reloading
//
// An Engine is immutable and safe for concurrent use. A Holder keeps the
// one in force with the operators (an InForce) and replaces both in one
// step when the operator's settings change; each request is judged wholly
// by one Engine and one list of operators, taken together:
//
//	h := &policy.Holder{}
//	h.Set(policy.InForce{Engine: engine, Operator: policy.Operators(operators)})
//	in := h.InForce() // once per request
//	d := in.Engine.Decide(ctx, policy.Request{Principal: addr, Operator: in.IsOperator(addr), …})
//	if _, err := h.Reload(path, policy.WithNetwork(network)); err != nil { … } // the old policy stays
//
// Explain gives the same judgement as lines for a person, for `snapnode
// policy check --from ADDR FILE`.
package policy
