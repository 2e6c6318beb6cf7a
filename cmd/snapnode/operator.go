package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// openTaskStore opens the node's task database, as `run` would with the
// same settings (--data-dir, --database, --config, SNAPNODE_*).
func (c *cli) openTaskStore(fs *flag.FlagSet, cfg *config.Config) (*sqlstore.Store, int, bool) {
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return nil, c.usageError(fs, err.Error()), false
	}
	if cfg.DatabaseDSN() == config.MemoryDatabase {
		return nil, c.usageError(fs, "the database is memory: a node's tasks are only in that node"), false
	}
	st, err := sqlstore.Open(context.Background(), cfg.DatabaseDSN())
	if err != nil {
		return nil, c.ioError("snapnode task "+fs.Name(), err), false
	}
	return st, 0, true
}

// operatorTask is one task as the operator commands print it: the SNAP
// task and the node's bookkeeping about it.
type operatorTask struct {
	Owner     string      `json:"owner"`
	Version   int64       `json:"version"`
	CreatedAt string      `json:"createdAt"`
	Task      *tasks.Task `json:"task"`
	// Events are the task's recorded events (task show only).
	Events []tasks.Event `json:"events,omitempty"`
}

// printTask prints t as one JSON line: without history and artifacts
// unless full, with events when given.
func printTask(c *cli, t *tasks.Task, full bool, events []tasks.Event) error {
	if !full {
		t = t.TrimHistory(0)
		t.Artifacts = nil
	}
	b, err := json.Marshal(operatorTask{Owner: t.Owner, Version: t.Version, CreatedAt: t.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z"), Task: t, Events: events})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// taskList is `snapnode task list`: the tasks in the node's database.
func (c *cli) taskList(args []string) int {
	fs := c.flagSet("task list", "[--state STATE]… [--from ADDRESS] [--limit N] [node settings]",
		"Lists the tasks in the node's database (one JSON line each: owner, version,",
		"createdAt and the task without its history), oldest first. For operators: it",
		"reads the database directly and checks no ownership.")
	cfg := config.Default()
	config.Flags(fs, &cfg)
	var states []tasks.State
	fs.Func("state", "only tasks in `STATE` (repeatable)", func(v string) error {
		if !tasks.State(v).Valid() {
			return fmt.Errorf("unknown state %q", v)
		}
		states = append(states, tasks.State(v))
		return nil
	})
	from := fs.String("from", "", "only tasks created by `ADDRESS`")
	limit := fs.Int("limit", 0, "at most `N` tasks (0: all)")
	_, code, done := c.parse(fs, args, 0)
	if done {
		return code
	}
	st, code, ok := c.openTaskStore(fs, &cfg)
	if !ok {
		return code
	}
	defer st.Close()
	list, err := st.List(context.Background(), tasks.Filter{Owner: *from, States: states, Limit: *limit})
	if err != nil {
		return c.ioError("snapnode task list", err)
	}
	for _, t := range list {
		if err := printTask(c, t, false, nil); err != nil {
			return c.ioError("snapnode task list", err)
		}
	}
	return exitOK
}

// taskShow is `snapnode task show ID`: one task with its history,
// artifacts and events.
func (c *cli) taskShow(args []string) int {
	fs := c.flagSet("task show", "[node settings] ID",
		"Prints one task of the node's database with its history, artifacts and",
		"events (each status change and artifact, at the task version it made).")
	cfg := config.Default()
	config.Flags(fs, &cfg)
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the task ID")
	}
	st, code, ok := c.openTaskStore(fs, &cfg)
	if !ok {
		return code
	}
	defer st.Close()
	t, err := st.Get(context.Background(), pos[0])
	if err != nil {
		fmt.Fprintf(c.stderr, "snapnode task show: %v\n", err)
		return exitFail
	}
	events, err := st.Events(context.Background(), t.ID, 0)
	if err != nil {
		return c.ioError("snapnode task show", err)
	}
	if err := printTask(c, t, true, events); err != nil {
		return c.ioError("snapnode task show", err)
	}
	return exitOK
}
