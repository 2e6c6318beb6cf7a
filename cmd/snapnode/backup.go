package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
)

// backupCommand is `snapnode backup --out DIR`: a copy of the node's state
// (internal/backup) while it runs.
func (c *cli) backupCommand(args []string) int {
	fs, cfg := c.nodeFlagSet("backup")
	out := fs.String("out", "", "write the backup into the empty or missing folder `DIR`")
	check := fs.String("check", "", "check that the backup folder `DIR` can be restored for this node's settings, before restoring it; write nothing")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	switch {
	case *out != "" && *check != "":
		return c.usageError(fs, "give --out DIR to make a backup or --check DIR to check one, not both")
	case *out == "" && *check == "":
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
