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
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	if *out == "" {
		return c.usageError(fs, "give the folder to write the backup into: --out DIR")
	}
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return c.configError(fs, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
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
