package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/metrics"
	"github.com/snapnode/snapnode/internal/shellword"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// consoleLogin is the console as the admin socket issues logins to it:
// base is the URL of the HTTP listener.
type consoleLogin struct {
	c    *console.Console
	base string
}

// errNoConsole answers console-url on a node that serves no console.
var errNoConsole = errors.New("the operator console is off: it is served on the HTTP listener (http_listen), which is off, and it needs a database (not memory)")

// newConsole builds the operator console on the node's parts; nil when
// the node runs no proposals (memory database: no decisions to take, no
// audit log).
func (n *Node) newConsole(mx *metrics.Metrics) (*console.Console, error) {
	if n.props == nil {
		return nil, nil
	}
	c, err := console.New(console.Config{
		Source:      newConsoleSource(n),
		Decider:     n.props,
		Metrics:     mx.Registry(),
		AllowRemote: n.cfg.ConsoleRemote,
		PeerUser:    consolePeerUser(),
		NodeFlags:   nodeFlags(n.cfg),
		Logger:      n.logger.With("part", "console"),
	})
	if err != nil {
		return nil, fmt.Errorf("node: console: %w", err)
	}
	return c, nil
}

// loginBase is the URL a browser on this machine reaches the listener at
// addr by: an unspecified host (0.0.0.0, ::) is reached on loopback.
func loginBase(addr net.Addr) string { return "http://" + dialAddr(addr) }

// consoleSource is the node's state as the console reads it.
type consoleSource struct {
	n *Node
	// sealRecord is the node's record of its last seal, taken from the
	// settings at start: a request must not read n.cfg, which Reload
	// replaces.
	sealRecord string
}

// newConsoleSource returns n's state as the console reads it.
func newConsoleSource(n *Node) consoleSource {
	return consoleSource{n: n, sealRecord: n.cfg.SealRecordPath()}
}

var _ console.Source = consoleSource{}

func (s consoleSource) Tasks(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	return s.n.Tasks.List(ctx, f)
}

func (s consoleSource) Task(ctx context.Context, id string) (*tasks.Task, error) {
	t, err := s.n.Tasks.Task(ctx, id)
	if snap.CodeOf(err) == snap.CodeTaskNotFound {
		return nil, fmt.Errorf("task %s: %w", id, tasks.ErrNotFound)
	}
	return t, err
}

func (s consoleSource) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	return s.n.props.HeldPage(ctx, q)
}

func (s consoleSource) HeldAction(ctx context.Context, taskID, actionID string) (*executor.Pending, error) {
	return s.n.props.HeldAction(ctx, taskID, actionID)
}

// Job reads the job's newest limit steps alone (agent.Store.Recent): its
// history may hold thousands.
func (s consoleSource) Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error) {
	if s.n.agent == nil {
		return nil, nil, nil
	}
	store := s.n.agent.Store()
	j, err := store.Get(ctx, taskID)
	if errors.Is(err, agent.ErrNoJob) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	its, _, err := store.Recent(ctx, taskID, limit)
	return j, its, err
}

func (s consoleSource) Proposer(ctx context.Context, taskID, actionID string) (*agent.Interaction, error) {
	if s.n.agent == nil {
		return nil, nil
	}
	return s.n.agent.Store().Proposer(ctx, taskID, actionID)
}

func (s consoleSource) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	return s.n.exec.audit.Query(ctx, f)
}

func (s consoleSource) AuditCount(ctx context.Context, f audit.Filter) (int64, error) {
	return s.n.exec.audit.Count(ctx, f)
}

// VerifyAudit verifies the log against the node's record of its last
// seal, as `snapnode audit verify` does.
func (s consoleSource) VerifyAudit(ctx context.Context) (audit.Report, error) {
	return s.n.exec.audit.VerifyWithRecord(ctx, audit.VerifyOptions{}, s.sealRecord)
}

// nodeFlags are the flags that name this node to the snapnode commands
// the console's pages tell (console.Config.NodeFlags), as shell words:
// none for a node run with the default settings (the bare command finds
// it in the folder it runs in); else its settings file and its data
// folder (where its admin socket is), absolute, wherever the command
// runs, and, when no settings file names it, its database
// (databaseFlag): a SQLite file absolute, a PostgreSQL URL with its
// passwords left out (xxxxx: the page does not show them; the operator
// puts them back).
func nodeFlags(cfg config.Config) string {
	if cfg.ConfigFile == "" && cfg.DataDir == config.Default().DataDir && cfg.Database == "" {
		return ""
	}
	var words []string
	flag := func(name, value string) { words = append(words, "--"+name, shellword.Quote(value)) }
	if cfg.ConfigFile != "" {
		flag("config", absolute(cfg.ConfigFile))
	}
	flag("data-dir", absolute(cfg.DataDir))
	if cfg.ConfigFile == "" && cfg.Database != "" {
		flag("database", databaseFlag(cfg.Database))
	}
	return strings.Join(words, " ")
}

// absolute is path made absolute, or as it is when it cannot be.
func absolute(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// databaseFlag is the --database that names the node's database dsn,
// read as the node reads it (sqldb.Open): a SQLite file, however given
// (a path, sqlite:PATH), its absolute path; memory as it is; a
// PostgreSQL URL, its scheme in any letter case, without its passwords
// (sqldb.Redacted).
func databaseFlag(dsn string) string {
	if dsn == config.MemoryDatabase {
		return dsn
	}
	if d, path, err := sqldb.Target(dsn); err == nil && d == sqldb.SQLite {
		return absolute(path)
	}
	return sqldb.Redacted(dsn)
}

// ShowDatabase is the --database dsn as a command's hints print it: a
// PostgreSQL DSN without its passwords (sqldb.Redacted), anything else as
// given. Commands name the database with it, never opening sqldb
// themselves.
func ShowDatabase(dsn string) string { return sqldb.Redacted(dsn) }
