// Package executor carries out what untrusted agents propose, without
// trusting them: it validates a proposal (package proposal), derives its
// Action Descriptor, judges it (package policy), stages its changes in the
// workspace (package sandbox), promotes them or holds them for an
// operator's confirmation, keeps what a rollback needs, and writes every
// step to the hash-chained audit log (package audit). It knows nothing of
// SNAP or Nostr: the task service hands it the bytes of a proposal and
// turns the Result into task state and artifacts.
//
//	holder := &policy.Holder{}
//	holder.Set(policy.InForce{Engine: policy.Default(), Operator: policy.Operators(operators)})
//	ex, err := executor.New(ctx, executor.Config{DB: db, Sandbox: sb, Policy: holder, Audit: log})
//	// on a reload, the new policy and operators in one step:
//	holder.Set(policy.InForce{Engine: newPolicy, Operator: policy.Operators(newOperators)})
//	res, err := ex.Run(ctx, executor.Request{TaskID: task, Requester: "bc1p…", Data: raw})
//	switch res.Outcome {
//	case executor.Completed: // res.Output ({"status":"success",…}), res.Diff, res.Response (FINISH)
//	case executor.Failed: // res.Output is the structured error
//	case executor.NeedsConfirmation: // input_required: res.Reason, res.Diff, res.ActionID
//	}
//	// later, from an operator's signed message or the admin socket:
//	res, err = ex.Approve(ctx, res.ActionID, "host") // or Deny(ctx, id, approver, reason)
//	// and from the host alone:
//	err = ex.Rollback(ctx, actionID)
//
// # The steps of an action, and their audit entries
//
//	received    the bytes arrived (their size and SHA-256)
//	rejected    they are not a valid proposal or descriptor: the Result
//	            is Failed with proposal.Error's JSON (the structured error)
//	validated   the proposal and the host's descriptor of it
//	judged      the policy's decision (promote, confirm or block), reasons,
//	            policy version; block ends as Failed with ACTION_NOT_ALLOWED
//	completed   THINK, FINISH, READ_FILE, LIST_FILES ran (no effect)
//	sandboxed   changes staged: the diff, pre- and post-image hashes
//	failed      a declared precondition does not hold (PRECONDITION_FAILED,
//	            checked before the sandbox runs anything), the sandbox
//	            refused (EXECUTION_FAILED, LIMIT_EXCEEDED) or the diff went
//	            beyond the declared effects (UNDECLARED_EFFECTS); or, as the
//	            host (decision "recovered"), a promotion cut short was undone
//	held        waits for an operator (a pending record in the database)
//	confirmed   an operator (or the host) approved
//	denied      an operator denied: Failed with CONFIRMATION_DENIED
//	promoted    the changes reached the workspace
//	rolled_back the host restored the snapshot (or was refused)
//
// What an entry holds is the host's audit level for the action's risk
// (Config.AuditLevels; see AuditLevels): SUMMARY the action, decisions
// and paths; DETAILED also content hashes, policy detail and errors;
// FORENSIC also the proposer's reasoning and the diff. A peer
// descriptor's audit.log_level and retain_days are recorded in the
// validated entry, never applied.
//
// Entries of one call are appended together, in one batch, before
// anything with an effect happens (a stored record, a promotion) and when
// the call ends; none is ever left out. The snapshot is stored in the
// record before promotion, so that RecoverInterrupted can undo a
// promotion a crash cut short; the new file contents are written and
// synced under temporary names meanwhile, and renamed into place only once
// that commit is durable. A promotion the sandbox leaves half-way in a
// running process (sandbox.ErrIncomplete: a path failed, and so did
// putting the others back) is undone from the same snapshot at once, as
// RecoverInterrupted would: the action fails ("interrupted during
// promotion; its effects were undone", audited "failed", decision
// "recovered") and its caller gets that Result. Only when that undo fails
// too does the record stay promoting until the next start. A rollback
// left half-way is completed the same way (audited "rolled_back",
// decision "recovered").
//
// RecoverInterrupted never writes over a path that something else changed
// since the promotion (it holds neither image): it puts the others back
// (sandbox.RecoverAround), leaves that one as found and settles the
// action all the same, where it refused, and the node did not start. The
// promotion fails with a reason naming each path left, the hash the
// promotion left there and the one found (ReasonDiverged), its entry
// ("failed", decision "recovered") listing them under "diverged", and the
// log says so at warn level. A file the crash left set aside under its
// hidden name, edited meanwhile, is moved to a visible name beside its
// path (sandbox.Divergence.Kept) and its path left as found: the reason
// says what the path holds (what the action wrote, where the crash came
// once it was in) and the name the edit was kept as, and the entry lists
// it under "diverged" with "kept". Should the commit that records this
// fail, or the node stop before it, the next recovery of the action says
// the same: the path still left as found, the edit named where it went.
//
// # Decisions where the design documents are silent
//
//   - What proposal.Classify calls a descriptor (a top-level
//     descriptor_version and no schema_version) goes to
//     proposal.ParseDescriptor; anything else is a proposal
//     (proposal.Parse), whose errors then say what is wrong.
//   - The host's descriptor decides: the action id is the host's (a new
//     UUID; the proposer's id is ProposalID), the effects checked against
//     the staged diff are those the operation really makes (a peer's
//     descriptor was checked to declare no less and no more), the risk is
//     the higher of the host's and the peer's, the caps the smaller.
//     max_duration_ms caps every sandbox call; max_disk_mb caps the bytes
//     an action writes; max_memory_mb the bytes it writes (half the cap)
//     and reads (the other half, shared among its paths); max_cpu_ms the
//     CPU time of its run, measured on the thread the run is pinned to
//     (the whole process's where the system reports no thread's), the
//     run's result discarded, before any effect, when it is passed. Where
//     no CPU time can be measured, every action is refused (rule
//     enforceableCap on /resources/max_cpu_ms).
//   - Preconditions: what a peer's descriptor declares (paths_exist, with
//     wildcards; user_idle and network_available, answered from
//     Config.Facts) is checked before the sandbox runs anything, and again
//     at approval. Whether a path exists is what a listing of its folder
//     tells, so each path of paths_exist is judged by the policy as a
//     LIST_FILES of the folder it is looked for in (above its first
//     wildcard), beside the action's own requests; a folder below it that
//     a wildcard reaches is looked into only if the policy plainly permits
//     listing it, and is otherwise taken to hold no match. A composite's
//     step may rely on what an earlier step creates. The first that does not hold fails the action
//     (PRECONDITION_FAILED, with precondition and field); the action is
//     recorded as failed and nothing runs it again: only a new proposal,
//     a new decision, can. The host's own descriptor of a proposal lists
//     the paths its operation needs; those the sandbox checks as it runs
//     (EXECUTION_FAILED, not_found).
//   - A Permit becomes a Confirm when a descriptor requires confirmation:
//     the host's (Defaults.ConfirmAtOrAbove, HIGH by default) or a peer's
//     asking for it. A peer can ask for more care, never for less.
//   - A composite's children are staged in one Stage, each judged alone
//     beside the composite itself (policy.Combine: any Deny blocks all,
//     any Confirm makes one confirmation for the whole), promoted all or
//     nothing and rolled back all or nothing. Its steps read, list,
//     change files or THINK (FINISH is a validation error, rule
//     compositeStep). Every read and listing sees the workspace as it was
//     before the composite, never what an earlier step staged: one of a
//     path an earlier step changes (for a listing, of what lies directly
//     in the directory) is a validation error naming the step's path
//     (rule compositeReadAfterChange). A file read and then replaced must
//     still hold, at staging, what was read. The reads run when the
//     changes are staged (again at approval) and their outputs are among
//     the composite's steps.
//   - Success results beyond READ_FILE's {"content"}: FINISH
//     {"response"}, LIST_FILES {"entries"}, WRITE_FILE {"path","size",
//     "sha256"}, CREATE_DIRECTORY and DELETE_FILE {"path"}, RENAME_FILE
//     {"source","destination"}, a composite {"steps":[…outputs…]}, THINK
//     {}. A file read that is not UTF-8 comes back in base64 with
//     "encoding":"base64".
//   - A Deny is the policy error of the proposal schema versioning strategy
//     (docs/conformance.md), ACTION_NOT_ALLOWED, with the policy's reasons
//     and version added.
//   - At approval the action is judged again by the policy in force: a
//     policy that now denies wins over the confirmation.
//   - Addresses compare without regard to case (bech32), so a proposer
//     cannot approve itself by changing the case of its address. An
//     operator may deny its own proposal: denying only prevents effects.
//   - A refused approval or denial is audited as "rejected" with decision
//     approval_refused or denial_refused (the audit has no step of its own
//     for it).
//   - A WRITE_FILE creates the folders missing above its file; the
//     host's descriptor declares each one it may create under
//     effects.filesystem.create, and each one created is a change of its
//     own in the diff, the audit and the rollback snapshot.
//   - An action that would take its requester past one of its Quotas
//     fails with LIMIT_EXCEEDED, limit requester_bytes, requester_files
//     or requester_dirs.
//   - A promotion that finds a file changed since staging (a moment ago)
//     fails the proposal in Run (cause "changed": send it again), and
//     sends it back to the operator in Approve.
//
// # Schema
//
//	executor_actions(action_id PK, task, requester, proposal_id, action,
//	                 state, data, diff, pre_images, reason, snapshot,
//	                 repeat_key (unused), created_at, updated_at,
//	                 rolled_back_at, snapshot_at, snapshot_bytes,
//	                 snapshot_pruned_at, grow_bytes, grow_files, grow_dirs,
//	                 claim_token)
//	executor_usage(requester PK, bytes, files, dirs)
//	executor_rollback_paths(path PK, rolled_back_at)
//	executor_snapshot_totals(requester PK, bytes)   SQLite only
//
// executor_usage is what each requester's promoted actions added to the
// workspace, checked against the Quotas (see Quotas for who owns what),
// together with the grow_* of the requester's records still promoting:
// what each of those adds, held against its quotas until it is counted
// in executor_usage or leaves promoting otherwise.
// executor_snapshot_totals, kept by triggers on executor_actions, is the
// bytes of each requester's prunable snapshots, so that a promotion reads
// one row to tell whether the byte bound is passed (PostgreSQL sums them
// instead; see pruneSnapshotsTx).
//
// A record is made for each action that is held or promoted, or whose
// precondition failed; its states
// are pending → approving → promoting → promoted → rolling_back →
// rolled_back, or completed, denied, failed.
//
// A claim is owned, not only a state: approving, promoting and
// rolling_back are each held by one call, under the claim_token that
// call's claim wrote (a new random token: an approval's pending →
// approving, a rollback's promoted → rolling_back, a promotion inserted
// promoting), kept while the call goes on (approving → promoting →
// approving again) and cleared (the empty token) by every write that
// leaves those states. Every later write of the call (save, settle, a
// release) is conditioned, in its one UPDATE, on the state and the
// token. When
// another process's recovery takes up an action that stood still past
// reconcile_after, it writes under the token it read and leaves the
// record without one (an approval handed back to pending, a promotion
// failed, a rollback completed); a promotion or a rollback it first
// takes over, under a new token of its own, before it puts any path
// back, so that the call's own commit cannot land in between. The call
// that stood still then finds
// the record is no longer its own, even once another approval has made
// it approving again, and its writes fail with ErrTakenUp: nothing of
// them stays. Nor does it change the workspace once taken over: a
// promotion, a rollback and the undo of either (sandbox.Recover) check,
// holding the sandbox's folder lock (sandbox.Checked), that the record is
// still in its state under the call's token, and write nothing otherwise
// (ErrTakenUp). A recovery takes the record over before its Recover takes
// that lock: a call that stood still before its first write cannot write
// over what the recovery put back, nor over what another action promoted
// since. Where the folder is not locked (see package sandbox) this holds
// within one process only. Records made before the column have the empty
// token, as do those in no held state.
//
// Snapshots (pre-images with
// their content) are bounded: kept Config.SnapshotMaxAge, and at most
// Config.SnapshotMaxBytes for one requester's actions (the oldest pruned
// first, at each promotion). A rollback past either bound is
// ErrSnapshotPruned, saying when and why; the record itself stays.
package executor
