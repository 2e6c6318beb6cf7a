// Package proposal validates what an untrusted agent proposes and derives
// the Action Descriptor the host judges, sandboxes and audits
// (schemas/proposal.v1.json, schemas/action-descriptor.v1.json; each rule
// and its test in docs/conformance.md). It reads and writes JSON and
// nothing else: no file, no clock of its own (Defaults.Now), no network,
// no SNAP.
//
// A proposal arrives as bytes; Parse returns it or a *proposal.Error whose
// JSON is the structured error of the proposal schema versioning strategy:
//
//	p, err := proposal.Parse(raw)
//	var pe *proposal.Error
//	if errors.As(err, &pe) {
//		out, _ := json.Marshal(pe) // {"error_code":"ACTION_NOT_ALLOWED","message":…}
//		// errors.Is(err, proposal.ErrVersionIncompatible), ErrActionNotAllowed, ErrValidation
//	}
//	d := proposal.Describe(p, defaults) // the full descriptor: risk, scope, effects, rollback…
//	// … policy, sandbox, promotion (other packages) …
//	out := proposal.ReadFileSuccess(p, content) // {"status":"success","action":"read_file","result":{"content":…}}
//
// A descriptor sent by a peer is checked with ParseDescriptor, and its
// created_at against the host's clock with CheckCreatedAt; a composite is
// built from leaf descriptors with Compose.
//
// # Order of checks
//
// Parse: strict JSON (one object; duplicate names, invalid UTF-8, lone
// surrogates and numbers beyond a double refused), then schema_version
// (missing or not MAJOR.MINOR.PATCH: ErrValidation; major ≠ 1:
// SCHEMA_VERSION_INCOMPATIBLE, "Unsupported proposal schema version.",
// with received_version and supported_version_range "1.x.x"), then the
// disallowed actions (run_command, spawn_process in any ASCII letter case:
// ACTION_NOT_ALLOWED, "Generic command execution is not permitted in the
// core schema."), then schemas/proposal.v1.json. A validation error names
// one field, as a JSON pointer, and the rule it broke (the JSON Schema
// keyword, or jsonSyntax, duplicateName, invalidUTF8, number). When
// several fields fail, the one reported is the first in the order of the
// proposal field constraints (schema_version, action, reasoning, id,
// args; then path, content, response, source, destination), unknown
// fields after known ones.
//
// # Decisions where the design documents are silent or differ
//
//   - The versioning strategy's examples omit id and reasoning and use /tmp
//     paths; the proposal field constraints and the project's design require
//     both fields and /sandbox/ paths, and win. Because the version and
//     disallowed-action checks come first, its examples 1 and 3 (an
//     incompatible version, a disallowed action) yield exactly their
//     documented output as written. Example 2 as written is a validation
//     error ({"field":"/reasoning","rule":"required"}: reasoning ranks
//     before id in the field order); completed with an id, a reasoning and
//     /sandbox/a.txt it is valid, and ReadFileSuccess(p, "hello world\n") is
//     its documented output.
//   - Action spellings: the upper-case names of the field constraints and
//     the all-lower-case ones of the versioning strategy (read_file) are the
//     same actions. Mixed case (Read_File) is an unknown action, a
//     validation error on /action (rule enum): an ambiguous spelling is
//     refused, not guessed. The success output echoes the action as the
//     proposer spelled it. Only run_command and spawn_process are matched in
//     any case, since they must never slip through as "unknown".
//   - An unknown action is ErrValidation on /action; ACTION_NOT_ALLOWED is
//     kept for what the core refuses on principle (the versioning
//     strategy's "policy error").
//   - VALIDATION_ERROR is this package's name for the versioning
//     strategy's "validation error", which it leaves unnamed.
//   - Paths are literal and normalised: /sandbox/ (the workspace, useful to
//     LIST_FILES) or /sandbox/name/…, no empty, . or .. name, no name over
//     255 characters, no trailing slash, no control character, at most
//     4096 characters, and none of the characters that are wildcards in
//     descriptors (the star, ?, [, ] and backslash). Write and delete
//     targets end in .txt or .md, lower case, and so do both paths of a
//     rename: a rename removes its source, so the source follows the
//     delete rule (stricter than the proposal field constraints, which
//     allow any source). The sandbox still
//     resolves every path through os.Root; the schema removes second
//     readings early.
//   - FINISH's response, like WRITE_FILE's content and reasoning, has at
//     least one character. The id is any UUID in 8-4-4-4-12 form, either
//     letter case. schema_version has no pre-release or build suffix.
//   - Descriptors: the action descriptor specification's types have no place
//     for THINK, FINISH or LIST_FILES, and none carries the operation
//     itself. Following the specification's "extend, do not bypass", the
//     schema adds the types THINK, FINISH and DIRECTORY_LIST and the members
//     operation (a leaf's action and args, checked by the proposal schema's
//     rules) and children (a composite's leaf descriptors; composites do not
//     nest). The types the core never runs (COMMAND_EXECUTION,
//     PACKAGE_INSTALL, PACKAGE_REMOVE, NETWORK_REQUEST, UI_AUTOMATION,
//     CONFIG_CHANGE, DIRECTORY_DELETE) and requests for network, UI or
//     system state are ACTION_NOT_ALLOWED.
//   - A derived descriptor gets a new action_id: the proposer's id is kept
//     for traceability by the caller but is not trusted to be unique.
//     intent_summary and the confirmation reason are written by the host
//     from the operation, never copied from the proposer's reasoning.
//   - A write cannot know, before it runs, whether its file exists; its
//     path is declared under both create and modify. A peer may declare
//     one of the two; a sandbox diff outside what is declared is blocked.
//   - In a peer's descriptor, scope, effects and paths_exist may use
//     wildcards (shell globs within one name; with recursive, a scope path
//     also covers what lies below what it names). A leaf's effects must
//     cover what its operation changes and claim nothing else; a
//     composite's effects are exactly the union of its children's, entry
//     for entry. At most 64 KiB of wildcard patterns per descriptor keep
//     the matching cheap (rule wildcardBudget).
//   - sandbox_type: the host has os_root only. A descriptor asking for
//     container or vm is ACTION_NOT_ALLOWED on /sandbox/sandbox_type, its
//     JSON listing what the host has ("available":["os_root"]): isolation
//     weaker than asked for is never substituted silently.
//   - Preconditions network_available and user_idle, when true, ask the
//     host for facts its operator configures (is the network up, is the
//     machine's user away); they grant nothing, and the executor checks
//     them, with paths_exist, before the action runs. Resources have
//     schema ceilings; the host applies the smaller of a peer's caps and
//     its own. A peer's audit level and retention are never authority:
//     the host logs with its own.
package proposal
