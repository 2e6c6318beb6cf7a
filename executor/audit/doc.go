// Package audit is the executor's hash-chained audit log: every step of
// every action (received, validated, judged, sandboxed, held, confirmed,
// denied, promoted, rolled back, failed…) is one entry, chained to the one
// before by its hash, kept in the node's SQL database beside the tasks
// (SQLite or PostgreSQL, through internal/sqldb).
//
//	db, err := sqldb.Open(ctx, "sqlite:/var/lib/snapnode/snapnode.db", sqldb.Options{})
//	…
//	log, err := audit.New(ctx, db, audit.Options{Retain: 30 * 24 * time.Hour,
//		Signer: audit.IdentitySigner(key, identity.Mainnet)}) // signs checkpoints
//	…
//	e, err := log.Append(ctx, audit.Entry{
//		Actor: "bc1p…", Task: taskID, Action: proposalID,
//		Step: audit.StepJudged, Decision: "confirm", Reason: "DELETE_FILE is HIGH risk",
//		PolicyVersion: policyVersion, PreHash: before, // hex SHA-256 of the file
//	})
//	report, err := log.Verify(ctx)          // errors.Is(err, audit.ErrTampered)
//	err = log.Export(ctx, os.Stdout, 0)     // JSON Lines
//	report, err = audit.VerifyJSONL(file)   // the same checks, offline
//	tick := time.NewTicker(time.Hour)
//	go log.RunPruner(ctx, tick.C, 5*time.Minute, nil)      // prunes every hour; ends with ctx
//
// # The chain
//
// Append gives an entry the next seq (gapless, from 1), the time of the
// log's clock, the hash of the entry before as Prev (Genesis, 64 zeros,
// for the first) and its own Hash: SHA-256 over a length-prefixed encoding
// of every field, spelled out at Hash so that any tool can recompute it.
// It does so in a transaction of sqldb.DB.Write that reads the head record
// (audit_head: the chain's first seq and the hash it chains to, its last
// seq and hash) with SELECT … FOR UPDATE, inserts the entry and moves the
// head: on PostgreSQL the row lock makes every process's appenders queue,
// so two nodes sharing a database build one chain; on SQLite the single
// writer does. Within a process, appends that arrive while one is being
// written are joined into the next transaction, so that concurrent
// appenders share the lock and the commit. The entry is committed when
// Append returns.
//
// AppendTx appends inside a transaction of the caller on the same
// database, so that entries and the caller's own rows commit together (the
// executor stores an action's record and the audit of its steps in one
// commit) or not at all:
//
//	err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
//		if _, err := tx.ExecContext(ctx, "UPDATE my_rows SET …"); err != nil {
//			return err
//		}
//		_, err := log.AppendTx(ctx, tx, entries) // last: the head is locked until the commit
//		return err
//	})
//
// # What Verify detects, and what it cannot
//
// Verify (and VerifyJSONL on an export) walks the chain and names the
// first bad entry (*VerifyError: Seq, Kind, Detail): an edited field of
// any entry (the hash no longer matches), an entry deleted from the middle
// or the start (a gap), entries swapped or renumbered (an entry whose
// fields give its hash at another seq), an entry inserted before the start
// or after the end, entries deleted from the end (the head record says the
// chain goes further), an edited head record (its last hash disagrees) and
// a start moved by hand (no pruning record names it).
//
// A chain without a secret cannot stop someone who can write the database
// from rewriting it whole: deleting the last entries and moving the head
// record back, or editing an entry and recomputing every hash after it,
// head included, yields a valid chain. What catches that is an anchor kept
// outside the database: Report.Head (or Log.Head), the seq and hash of the
// last entry, copied elsewhere — printed by `snapnode audit verify`,
// shipped with the exports — and given back to a later Verify, which then
// fails if the chain no longer reaches that seq (KindTruncated) or holds
// another entry there (KindAnchor).
//
// # Seals
//
// With Options.Signer, Seal (every hour, RunSealer, also once
// Options.SealEvery entries were appended since the last seal, and at a
// clean stop, in a node) appends a StepSealed entry that signs the head before it,
// with the seal's time (SealDigest), after verifying the entries since
// the last seal. Verify checks every seal against the chain and the
// signer (KindSeal): a chain rewritten below a seal fails there unless
// its rewriter has the key, and a log sealed by another key fails
// against this node's, as ErrOtherKey too when the seal's signature
// holds (another node's log swapped in, or this node's after its key
// changed: the VerifyError names both addresses). What no seal covers is
// reported (Report.Unsealed): the entries after the last seal, which can
// still be cut or rewritten unseen, as can everything by whoever holds
// the key; the Log that appended them refuses to seal or prune a chain
// that lost the last of them (see Committed), but that knowledge goes
// with it. SealStatusOf summarises a verification's seals (the last, valid
// or not, and the entries after it), as `snapnode audit verify` and the
// console show them. Seals removed with the chain after them leave such entries
// only; the Log that wrote the last of them refuses to seal over it.
// So that a Log opened after such a rewrite (a node restarted) refuses
// too, Options.SealRecord names a file outside the database where Seal
// records each seal it writes (SealRecord: its seq, hash and time); Seal
// and Prune write nothing unless the chain holds the seal recorded
// (CheckSealRecord, KindRecord; ErrOtherKey when the chain holds that
// seal signed by another key than Options.Signer; with or without a
// record, CheckSealRecord checks the chain's last seal too, which no
// seal can follow unless it holds, and that the chain ends where the head
// record says, so that no entry is appended after a cut tail), and
// VerifyOptions.SealRecord makes Verify check it (Log.VerifyWithRecord
// reads the record's file, the check of `snapnode audit verify` and the
// console). A record older than the chain (a replica's, or one
// restored from a backup) is fine; one beyond its end, or contradicted
// by it, is not. A record that cannot be read (ErrSealRecord: out of
// reach, or not a record) is no evidence of tampering and is not
// ErrTampered; the checks go on without it and say what they found
// (*RecordError), but Seal and Prune write nothing.
//
// # Retention
//
// Retention is the host's (Options.Retain, Options.MaxEntries), never the
// proposer's: no field of an entry changes it. Prune drops the oldest
// entries, moves the start of the chain (the checkpoint: the first seq
// kept and the hash it chains to) and records that in a StepPruned entry,
// after verifying what it drops, so that the retained chain still verifies
// and pruning cannot launder tampering. Anchors older than the checkpoint
// can no longer be checked (Report.AnchorsPruned). With KeepOpen (the
// executor sets it), Retain stops before the first entry of an action
// still open, so that an action held longer than the retention keeps its
// story until it is decided.
//
// The checkpoint is what vouches for everything pruned, so with
// Options.Signer (the node's identity key) each pruning record carries a
// BIP-340 signature of it (CheckpointDigest), and Verify accepts only
// pruning records that key signed (KindCheckpoint): someone who can write
// the database but has not the key cannot move the start of the chain to
// hide entries, even by recomputing every hash after it. An export's
// verifier checks the signatures against the address they name and
// reports it (Report.CheckpointSigner), to be compared with the node's;
// given no address, it takes the seals' and checkpoints' signer to be one
// (the node signs both), so that a checkpoint appended after the last
// seal, unsigned or signed by another key, does not move the start of a
// sealed log.
// RunPruner prunes at every tick of a channel the caller owns (a
// time.Ticker's, or a test's).
//
// # Export
//
// Export writes a header line (the head record) and then one JSON line
// per entry with every field, hashes included; see Log.Export for the
// format. VerifyJSONL reads it strictly (unknown or duplicate members,
// invalid UTF-8 and other time formats are KindMalformed).
//
// # Schema
//
//	audit_log(seq PK, ts, actor, task, action, step, decision, reason,
//	          policy_version, pre_hash, post_hash, detail, prev, hash)
//	          indexes: (task, seq), (action, seq), (seq) of the seals
//	audit_head(id = 1, first_seq, first_prev, last_seq, last_hash)
//
// The migrations are embedded per dialect and applied by New, recorded in
// the database's snapnode_migrations as "audit".
package audit
