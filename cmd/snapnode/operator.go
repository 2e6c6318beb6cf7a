package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/tasks"
)

// openStores opens the stores of the node that the settings name
// (--data-dir, --database, --config, SNAPNODE_*) through node.OpenStores,
// for an operator command that reads them; what is what the command reads
// there. A SQLite file that does not exist is an error naming it: a
// command run in the wrong folder never creates an empty node. The stores
// warn on the command's stderr (quietLogger) of what they drop.
func (c *cli) openStores(fs *flag.FlagSet, cfg *config.Config, what string) (*node.Stores, int, bool) {
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return nil, c.configError(fs, err), false
	}
	st, err := node.OpenStores(context.Background(), *cfg, quietLogger(c))
	switch {
	case errors.Is(err, node.ErrMemoryDatabase):
		return nil, c.usageError(fs, "the database is memory: the node keeps its "+what+" nowhere else"), false
	case errors.Is(err, node.ErrNoDatabase):
		return nil, c.noNode(fs, err), false
	case err != nil:
		return nil, c.ioError(fs.Name(), err), false
	}
	return st, 0, true
}

// noNode reports that the settings name no node's database (err says
// which file is missing) and returns 1.
func (c *cli) noNode(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(c.stderr, "%s: %v: no node keeps its data here; run the command in the folder the node runs in, or give the node's --data-dir, --database or --config (or SNAPNODE_DATA_DIR)\n", fs.Name(), err)
	return exitFail
}

// openStore opens one store of the node (openStores) with open; done
// closes it and the database.
func openStore[S any](c *cli, fs *flag.FlagSet, cfg *config.Config, what string, open func(*node.Stores, context.Context) (S, error)) (st S, done func(), code int, ok bool) {
	stores, code, ok := c.openStores(fs, cfg, what)
	if !ok {
		return st, nil, code, false
	}
	st, err := open(stores, context.Background())
	if err != nil {
		stores.Close()
		return st, nil, c.ioError(fs.Name(), err), false
	}
	return st, stores.Close, 0, true
}

// taskReader is what task list and task show read of the node's task
// store: the tasks a filter selects, one task, and the events a task
// recorded after a version.
type taskReader interface {
	List(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error)
	Get(ctx context.Context, id string) (*tasks.Task, error)
	Events(ctx context.Context, id string, after int64) ([]tasks.Event, error)
}

// openTaskStore opens the task store in the node's database.
func (c *cli) openTaskStore(fs *flag.FlagSet, cfg *config.Config) (taskReader, func(), int, bool) {
	return openStore(c, fs, cfg, "tasks", func(s *node.Stores, ctx context.Context) (taskReader, error) {
		st, err := s.Tasks(ctx)
		return st, err
	})
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
	fs, cfg := c.nodeFlagSet("task list")
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
	if *limit < 0 {
		return c.usageError(fs, fmt.Sprintf("--limit %d: want 0 (all) or more", *limit))
	}
	if *from != "" {
		if _, err := identity.ParseAddress(*from); err != nil {
			return c.usageError(fs, "--from: "+err.Error())
		}
	}
	st, closeStore, code, ok := c.openTaskStore(fs, cfg)
	if !ok {
		return code
	}
	defer closeStore()
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
	fs, cfg := c.nodeFlagSet("task show")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the task ID")
	}
	st, closeStore, code, ok := c.openTaskStore(fs, cfg)
	if !ok {
		return code
	}
	defer closeStore()
	t, err := st.Get(context.Background(), pos[0])
	if errors.Is(err, tasks.ErrNotFound) {
		fmt.Fprintf(c.stderr, "snapnode task show: task %s is not in this database (snapnode task list %slists them; a task is deleted task_retention after it ends)\n",
			pos[0], nodeCommand(fs))
		return exitFail
	}
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
