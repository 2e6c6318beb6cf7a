package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
)

// backupCommand is `snapnode backup --out DIR`: a copy of the node's state
// (internal/backup) while it runs.
func (c *cli) backupCommand(args []string) int {
	fs, cfg := c.nodeFlagSet("backup")
	out := fs.String("out", "", "write the backup into the empty or missing folder `DIR`")
	check := fs.String("check", "", "check that the backup folder `DIR` can be restored for this node's settings, before restoring it; write nothing")
	restore := fs.String("restore", "", "put the backup in the folder `DIR` back for this node's settings, the node stopped: checked as --check does, each file replaced atomically")
	keep := fs.Bool("keep-replaced", true, "with --restore, keep the files replaced beside them as NAME.before-restore-TIME (false: delete them)")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	given := 0
	for _, d := range []string{*out, *check, *restore} {
		if d != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return c.usageError(fs, "give one of --out DIR (make a backup), --check DIR (check one) or --restore DIR (restore one)")
	case given == 0:
		return c.usageError(fs, "give the folder to write the backup into: --out DIR")
	}
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return c.configError(fs, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *check != "" {
		return c.backupCheck(ctx, fs.Name(), *cfg, *check)
	}
	if *restore != "" {
		return c.backupRestore(ctx, fs.Name(), *cfg, *restore, !*keep)
	}
	m, err := backup.Run(ctx, *cfg, *out, backup.Options{})
	var msg string // the error without the package's prefix: the command names itself
	if err != nil {
		msg = strings.TrimPrefix(err.Error(), "backup: ")
	}
	switch {
	case errors.Is(err, backup.ErrPostgres):
		fmt.Fprintf(c.stderr, "%s: the database is PostgreSQL, which this command does not copy: run pg_dump --format=custom --file=snapnode.dump 'DSN' (consistent while the nodes run) and keep the identity key, policy and configuration files with it\n", fs.Name())
		return exitUsage
	case errors.Is(err, backup.ErrNotEmpty):
		fmt.Fprintf(c.stderr, "%s: %s; give a new or empty folder (a backup never mixes with other files)\n", fs.Name(), msg)
		return exitUsage
	case errors.Is(err, backup.ErrMemory):
		fmt.Fprintf(c.stderr, "%s: %s\n", fs.Name(), msg)
		return exitUsage
	case errors.Is(err, backup.ErrNoDatabase):
		return c.noNode(fs, err)
	case err != nil:
		fmt.Fprintf(c.stderr, "%s: %s\n", fs.Name(), msg)
		return exitFail
	}
	return c.printJSON(fs.Name(), m)
}

// backupCheck is `snapnode backup --check DIR`: backup.Check, the
// manifest printed when the folder can be restored, the first problem
// named (exit 1) when it cannot.
func (c *cli) backupCheck(ctx context.Context, name string, cfg config.Config, dir string) int {
	m, err := backup.Check(ctx, cfg, dir)
	var msg string
	if err != nil {
		msg = strings.TrimPrefix(err.Error(), "backup: ")
	}
	switch {
	case errors.Is(err, backup.ErrPostgres), errors.Is(err, backup.ErrMemory):
		fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
		return exitUsage
	case errors.Is(err, backup.ErrBad):
		fmt.Fprintf(c.stderr, "%s: %s: %s; restore nothing from it\n", name, dir, strings.TrimPrefix(msg, "not a sound backup: "))
		return exitFail
	case err != nil:
		fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
		return exitFail
	}
	return c.printJSON(name, m)
}

// backupRestore is `snapnode backup --restore DIR`: backup.Restore, what
// it did printed, with the audit head `snapnode audit verify` must give.
func (c *cli) backupRestore(ctx context.Context, name string, cfg config.Config, dir string, discard bool) int {
	r, err := backup.Restore(ctx, cfg, dir, backup.RestoreOptions{Discard: discard})
	var msg string
	if err != nil {
		msg = strings.TrimPrefix(err.Error(), "backup: ")
	}
	switch {
	case errors.Is(err, backup.ErrPostgres):
		fmt.Fprintf(c.stderr, "%s: the database is PostgreSQL, which this command does not restore: restore the pg_dump of it with pg_restore --clean --if-exists --dbname='DSN' FILE, put each node's key, policy and configuration files back, and move each node's audit-seal.json aside before it starts (see the operator's guide)\n", name)
		return exitUsage
	case errors.Is(err, backup.ErrMemory):
		fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
		return exitUsage
	case errors.Is(err, backup.ErrBad):
		fmt.Fprintf(c.stderr, "%s: %s: %s; nothing was restored\n", name, dir, strings.TrimPrefix(msg, "not a sound backup: "))
		return exitFail
	case errors.Is(err, backup.ErrRunning), errors.Is(err, backup.ErrUnfinished), errors.Is(err, backup.ErrBusy):
		fmt.Fprintf(c.stderr, "%s: %s; nothing was restored\n", name, msg)
		return exitFail
	case err != nil:
		fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
		return exitFail
	}
	m := r.Manifest
	w := c.stdout
	if r.Finished {
		fmt.Fprintf(w, "finished the restore of %s that had stopped before it ended\n", dir)
	}
	fmt.Fprintf(w, "restored the backup %s of %s, made %s:\n", dir, m.Address, m.CreatedAt.Format(time.RFC3339))
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %-9s %s (%s)", f.State, f.Source, f.Kind)
		switch {
		case len(f.Aside) > 0:
			fmt.Fprintf(w, "; kept the old as %s", strings.Join(f.Aside, ", "))
		case f.State == backup.StateReplaced:
			fmt.Fprint(w, "; the old deleted")
		}
		fmt.Fprintln(w)
	}
	if m.KeyInEnvironment {
		fmt.Fprintf(w, "the key is %s, not in the backup: start the node with it set as it is now\n", identity.EnvKey)
	}
	fmt.Fprintf(w, "the workspace %s is not in the backup: left as it is\n", r.Workspace)
	fmt.Fprintf(w, "start the node no sooner than %s after the old one stopped (the replay window: twice max_drift and a second), so that a copy of a request it handled after the backup is refused rather than carried out again\n", 2*cfg.MaxDrift.Duration+time.Second)
	fmt.Fprintf(w, "audit log: head seq %d hash %s (%d entries): snapnode audit verify must print the same head\n", m.Audit.Seq, m.Audit.Hash, m.AuditEntries)
	return exitOK
}
