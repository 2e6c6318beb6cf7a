// Package backup makes a consistent copy of a node's state while the node
// runs: its SQLite databases, its identity key file, the policy and
// configuration files it reads, its record of the last seal of its audit
// log (copied before the database, so that the copy's chain holds that
// seal or a later one, and verified against it), and a manifest that lists them with their
// sizes and SHA-256 sums, the node's address and the audit log's head at
// the time of the copy.
//
//	m, err := backup.Run(ctx, cfg, "/var/backups/snapnode/2026-11-25", backup.Options{})
//	switch {
//	case errors.Is(err, backup.ErrPostgres): // use pg_dump instead
//	case errors.Is(err, backup.ErrNotEmpty): // the output folder holds files
//	case err != nil:
//	}
//	fmt.Println(m.Address, m.Audit.Seq, m.Audit.Hash)
//
// Each database is copied with SQLite's VACUUM INTO on a connection of its
// own: the copy is one read transaction, a snapshot of the file as it was
// when the copy began, and in WAL mode a reader never blocks the node's
// writer nor waits for it. The copy of the task database (tasks, replay
// records, the audit log, the agent's jobs) is then opened, its integrity
// checked and its audit chain verified, its seals and checkpoints signed by
// the node's key, before the manifest is written; a folder without
// manifest.json is not a backup.
//
// The files keep the names the node gives them in its data folder, so
// that restoring a node that uses the default layout is copying the
// folder's files back into an empty data folder; each entry of the
// manifest also names the path the file was copied from.
//
// Run locks the output folder while it writes it, and Check and Restore
// hold a shared lock on the backup folder while they read it: a second
// backup into the same folder, or a check or restore of a backup still
// being written, is refused (ErrBusy).
//
// Check reads a backup folder before it is restored, writing nothing in
// it, and refuses (ErrBad, naming the first problem) one that is cut
// short, damaged or edited, holds links or files the manifest does not
// list, names a file outside itself, or would restore a file anywhere
// but where the node's settings have it read that kind of file; it
// verifies the audit chain of a copy of its tasks.db to the manifest's
// head, its seals signed by the manifest's address. The copy is made in
// a private folder of the data folder, not in a temporary folder others
// share; one a killed check left there is removed by the next, or by
// the node's start (RemoveCheckLeftovers).
//
// Restore puts a backup back for a node that is stopped (ErrRunning
// otherwise): Check first, then every file staged beside its source and
// renamed into place under a journal in the data folder, the files it
// replaces (a database with its -wal and -shm) kept aside as
// NAME.before-restore-TIME; a restore stopped midway is finished by the
// same restore run again, and a node does not start before. The
// workspace is not in a backup and is left alone.
//
// A PostgreSQL database is not copied nor restored (ErrPostgres): pg_dump
// makes a consistent copy of it while the nodes run, pg_restore puts it
// back.
package backup
