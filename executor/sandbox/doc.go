// Package sandbox is the workspace folder proposals act on, reached only
// through an os.Root: proposal paths ("/sandbox/…") are normalised
// strictly, effects are staged and diffed before anything is touched,
// promoted all or nothing, and can be rolled back from a snapshot.
//
// Paths. Normalize maps a proposal path to a relative path inside the
// sandbox or rejects it with a *PathError naming the Rule it broke
// (errors.Is(err, sandbox.RuleDotSegment), errors.Is(err,
// sandbox.ErrInvalidPath)). It decodes nothing and cleans nothing: "..",
// "//", a trailing slash, controls, non-UTF-8, backslashes, over-long or
// over-deep paths, non-NFC text and Unicode look-alikes of '.', '/' and
// '\' are all rejections, not rewrites. Every method takes virtual paths
// and normalises them itself.
//
//	sb, err := sandbox.Open(dataDir+"/sandbox", sandbox.Limits{MaxFileSize: 1 << 20})
//	defer sb.Close()
//	b, err := sb.Read(ctx, "/sandbox/notes/today.md")
//	entries, err := sb.List(ctx, "/sandbox/")
//
// Changes. Stage judges a list of changes as one unit without touching the
// folder; the executor checks the result against the declared effects
// (a wider diff is a permanent block), shows the diffs, and promotes:
//
//	st, err := sb.Stage(ctx, []sandbox.Change{
//		sandbox.Mkdir{Path: "/sandbox/notes"},
//		sandbox.Write{Path: "/sandbox/notes/today.md", Content: []byte("# Today\n")},
//		// Parents: the missing folders above the file are created too,
//		// each a touched path of its own.
//		sandbox.Write{Path: "/sandbox/a/b/c.md", Content: []byte("c\n"), Parents: true},
//	})
//	if err := st.Within(declaredPaths); err != nil { // *ScopeError: block
//		…
//	}
//	for _, d := range st.Diffs() { … d.Unified … }
//	snap, err := sb.Promote(ctx, st) // errors.Is(err, sandbox.ErrChanged): stage again, ask again
//	record, _ := json.Marshal(snap) // keep it durably
//
// Later, from the host only:
//
//	snap, err := sandbox.ParseSnapshot(record)
//	err = sb.Rollback(ctx, snap) // errors.Is(err, sandbox.ErrDiverged) names the path
//
// What the sandbox guarantees. Nothing outside the folder is opened, read,
// listed or written: os.Root stops every path, symbolic link and race that
// leads outside, and on top of it the sandbox follows no symbolic link at
// all (every directory is looked at with Lstat, opened, and checked to be
// that same directory), opens no file with more than one hard link (it may
// be an alias of an outside file), and never replaces, deletes or renames
// a link (one swapped in at the instant a file is replaced is moved to a
// private name and back, see below). Nor does it act on a name stored
// under another spelling than the path's (ErrSpelling): on a file system
// that ignores letter case or Unicode form, "/sandbox/SECRETS/key.txt"
// would find secrets/key.txt, which a rule on the path's text does not
// cover. Open finds whether the folder's file system does (a probe file
// looked up in capitals and decomposed); where it does, and below any file
// system mounted inside the folder, each name that is there must be in its
// directory's listing as spelled (or, stored decomposed, as its NFC form).
// A folder inside the workspace made to fold names on its own (chattr +F)
// is not seen. Files are written to a new temporary file in their own
// directory (O_EXCL), synced, put in place of their target (see Edits from
// outside), and the directory synced; Prepare writes and syncs the
// temporary files ahead, while the caller makes its own record durable,
// and PromotePrepared then only puts them in place. Deletes and renames
// take regular .txt and .md files only (a rename removes its source, so
// its source follows the delete rule, and its target must be text too);
// directories are created, never deleted (except by a rollback of their
// creation, which removes a directory only as one: a file or a link put
// at its name meanwhile stays, ErrDiverged); a rename never overwrites. Caps (Limits) on file size, total
// bytes, entries listed, changes per stage and duration are enforced: the
// operation fails with a *LimitError and changes nothing. Total bytes are
// checked by Stage and again by Promote, under the folder lock: stagings
// that each fit, but not together, are not all promoted.
//
// Several processes may open the same folder (replicas of a node sharing
// their workspace). Promote, Rollback and Recover hold a lock of the
// folder (flock on LockFile, a file in its root that the sandbox makes
// and keeps, which no proposal path names, List does not show and Sweep
// leaves) from their check of every path until their last step, in every
// process: one that finds it held waits, until its context ends (the
// cause is returned: MaxDuration's *LimitError, or the caller's), then
// checks the paths as they are once the other is done (ErrChanged,
// ErrDiverged). A process that ends releases it. A view made by Checked
// runs the caller's check holding that lock, before any path is looked
// at, and changes nothing if it fails: the caller's own record of the
// change (a claim in a database, say) is checked and the workspace
// changed with nothing of another process's in between, so long as that
// other process changes the record before it takes the lock.
//
// Edits from outside. A file that another process edits, not through a
// sandbox on the folder (an editor, a copy, a shell of the same user),
// after Promote checked it against its pre-image and before the sandbox
// replaces or removes it, is not written over. The sandbox never writes
// over a file where it lies: on Linux the new image is exchanged with it
// in one step (renameat2 RENAME_EXCHANGE), so the path always holds a
// file; elsewhere, and on a file system that cannot exchange, the file is
// first renamed to a private name in its directory, then the new image
// renamed in. A file to remove is renamed to that private name too. Each
// rename is atomic: the file checked is whatever the path held at that
// instant (one an editor renamed over it included). It is checked, through
// a descriptor, against the image it must hold once more (a regular file,
// one link, the same SHA-256); if it differs, it is put back and the whole
// promotion undone, and the error matches ErrChanged and names the path.
// A new file goes in only if its name is still free (RENAME_NOREPLACE;
// off Linux link(2), which never replaces): a file made there since the
// check is kept, ErrChanged too. Rollback, Recover and RecoverAround do
// the same with ErrDiverged, and so does the undo of a failed promotion
// (ErrIncomplete with it: the file edited stays as it is). A file set
// aside that cannot go back (the path was made, or replaced, again
// meanwhile), or that is not what was checked once its path was made
// again, is never left under its private name, hidden from listings and
// barring every later change of the path: it is moved to a visible name
// beside it, the name with ".kept-", the UTC time and, where that name
// is taken, "-" and a number put before its .txt or .md extension
// (notes.md gives notes.kept-20261127T184413Z.md), which the error gives.
// That name passes the path rules, a text file's keeps its extension, and
// no rename replaces a file there: it is a workspace file like any other,
// listed, and a proposal (or a person) may read, compare and delete it. A
// crash while a file is under its private name leaves it there: Sweep
// leaves it, and Recover puts it back on its empty path, removes the
// private name when it is a second link to the path's file (a crash
// between the link(2) and the removal off Linux), or removes it when the
// path holds a file again and it holds one of the snapshot's images.
// Holding anything else (an edit written through a descriptor while it
// was set aside), it is left, and Recover fails with ErrDiverged naming
// that hidden file; RecoverAround moves it to a visible name as above,
// leaves the path as found (the promotion's own image, where the crash
// came once it was in) and reports it, Divergence.Kept naming the new
// name and Note both. It moves it only once every path is checked, and
// moves it back if a later step fails: a RecoverAround that fails leaves
// it hidden, where the next one finds it and names it again. Before it
// moves any, it writes down, durably, the names they will take, in a
// private record of the change (RecoverAroundFor) at the folder's root:
// should its caller fail to record what it returned, the next
// RecoverAround of the change returns the same, the path still left as
// found and the file named where it went. ForgetKept removes the record
// once the caller has recorded the result; Sweep leaves it, and
// ForgetKeptExcept removes those a caller that stopped before ForgetKept
// left, keeping the records of the changes it has yet to record
// recovered. Like the other private files, a record is never listed,
// read or counted as a workspace file. Where the
// path's folders leave no room for a kept name (MaxPathBytes), nothing
// is moved, and the error names the hidden file, for a person to rename
// by hand. Until one of them has run, a change of that path
// fails (ErrChanged, ErrDiverged) naming the hidden file: recover the
// interrupted change first, or, with none left to recover, rename the
// file by hand to a visible name, or remove it.
//
// What it does not guarantee. The sandbox checks; it cannot exclude a
// writer (POSIX has no mandatory lock). A process that holds the file
// open across the replacement and writes through its descriptor after the
// last check (the instant between that hash and the removal of the
// private name) loses that write, as with any replacement by rename: its
// descriptor names a file that is no longer in the workspace. A write
// through such a descriptor before the last check is caught: the file is
// put back. Where the file system cannot exchange two names (off Linux,
// and some Linux file systems), a replaced path is empty between the two
// renames (a reader finds no file there for that instant); where it
// cannot rename without replacing either, a new image goes in by link and
// unlink, so for an instant the file has two names (a Read of it then
// fails with ErrHardLink), while a file is set aside by a plain rename
// once its private name is found free (never by link and unlink, which
// would remove a file renamed over its name in between), and so is a file
// moved to a visible name to be kept; and where it has no hard links
// either, the name is looked at before the rename, and a file made in
// between is written over. Off Linux, macOS and the BSDs, and on a file
// system that keeps no locks, the folder is not locked: promotions and
// rollbacks then run one at a time within a process only, and two
// processes promoting the same path meet as an editor and a sandbox do
// (see Edits from outside). A promotion is all or nothing by undo, not
// by one atomic step: a crash half-way leaves some paths promoted;
// Recover with the snapshot (stored before Promote, from st.Snapshot())
// restores them, and Sweep removes the temporary files left behind; a
// path that holds neither image refuses Recover, and RecoverAround leaves
// it as found and restores the others. Each
// temporary file is locked (flock) by its writer until it is renamed or
// removed, and Sweep removes only those no process holds: several
// processes may open the same folder (replicas of a node sharing their
// workspace), and one that starts and sweeps leaves the others' promotions
// in progress alone. Off Linux, macOS and the BSDs there are no such locks
// and Sweep removes every temporary file.
// Total bytes count regular files only (the sandbox's own temporary
// files left out); total entries count regular files and directories.
// Both are checked against a running count that every promotion and
// rollback keeps exact, one that fails half-way included: Stage and
// Promote walk the tree only when there is none yet (before the first
// Recount). Changes made from outside are counted by Recount, which the
// caller runs outside the actions, from time to time; a Recount during
// which promotions ran counts what they may have added unseen, so the
// count may stand above the workspace by the paths they changed, never
// below it, until the next one. Where the folder is locked, the count is
// shared by every process that opened it: kept in CountFile, in the
// folder's root, which each promotion and rollback reads and writes
// under the folder lock, so that processes sharing the folder never
// together pass a cap; one that finds it missing or unreadable counts
// the tree again. Where it is not locked, each process keeps a count of
// its own, which sees another's changes only at its next Recount: the
// caps hold per process only.
package sandbox
