package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// Errors of OpenStores.
var (
	// ErrMemoryDatabase: the settings keep the node's data in memory,
	// where nothing outlives the node.
	ErrMemoryDatabase = errors.New("the database is memory")
	// ErrNoDatabase: the settings name a SQLite file that does not exist
	// (the error names it).
	ErrNoDatabase = sqldb.ErrNoDatabase
	// ErrUnfinishedRestore: the data folder holds the journal of a
	// restore that stopped before it ended (the error names it); Start
	// refuses such a folder too.
	ErrUnfinishedRestore = errors.New("a restore (snapnode backup --restore) stopped before it ended")
)

// unfinishedRestore returns ErrUnfinishedRestore, naming the journal and
// saying what to do, when dataDir holds the journal of a restore stopped
// midway: some of the node's files may be the backup's, others not;
// refused says what is not done on them.
func unfinishedRestore(dataDir, refused string) error {
	j := filepath.Join(dataDir, backup.JournalName)
	if !fileExists(j) {
		return nil
	}
	return fmt.Errorf("node: %s: %w: some of the node's files may be the backup's, others not; %s. Run the same restore again to finish it (it names the backup)", j, ErrUnfinishedRestore, refused)
}

// Stores are the durable stores of a node — its tasks, the agent's jobs,
// the audit log — opened from the node's settings by a program other than
// the node: the operator's commands, which read them while the node runs
// (the database takes readers beside the node) or when it is down. Each
// store is opened, with the schema the node keeps, when first asked for;
// Close closes them and the database. A Stores is for one goroutine.
type Stores struct {
	cfg     config.Config
	logger  *slog.Logger
	db      *sqldb.DB
	tasks   *sqlstore.Store
	jobs    *agent.Store
	audit   *audit.Log
	closers []func()
}

// OpenStores opens the database of the node whose settings are cfg, as
// Start does, and is the one way a command other than the node reaches
// the node's stores. It never creates a database: a SQLite file that does
// not exist is ErrNoDatabase, so that a command run in the wrong folder
// never makes an empty node; a memory database is ErrMemoryDatabase. A
// data folder a restore stopped midway in is ErrUnfinishedRestore, as it
// is for Start: its audit log, checked against a record of the last seal
// of another time, would read as tampered with.
// The stores warn on logger (nil: nowhere) of what they drop, as the
// node's do on its own: the records of work elsewhere to cancel that a
// write of the job store drops (agent.Store.SetLogger).
func OpenStores(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Stores, error) {
	if cfg.DatabaseDSN() == config.MemoryDatabase {
		return nil, ErrMemoryDatabase
	}
	if err := unfinishedRestore(cfg.DataDir, "they are not read until it ends"); err != nil {
		return nil, err
	}
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{Existing: true})
	if err != nil {
		return nil, err
	}
	return &Stores{cfg: cfg, logger: logger, db: db}, nil
}

// Tasks returns the task store.
func (s *Stores) Tasks(ctx context.Context) (*sqlstore.Store, error) {
	if s.tasks == nil {
		st, err := sqlstore.New(ctx, s.db)
		if err != nil {
			return nil, err
		}
		s.tasks, s.closers = st, append(s.closers, func() { st.Close() })
	}
	return s.tasks, nil
}

// Jobs returns the agent's job store.
func (s *Stores) Jobs(ctx context.Context) (*agent.Store, error) {
	if s.jobs == nil {
		st, err := agent.OpenStore(ctx, s.db)
		if err != nil {
			return nil, err
		}
		st.SetMaxPendingInput(s.cfg.Agent.MaxPendingInputBytes)
		st.SetLogger(s.logger)
		s.jobs = st
	}
	return s.jobs, nil
}

// Audit returns the audit log. When the node has a key (its key file, or
// SNAPNODE_KEY), only checkpoints signed by it are accepted, as the node
// itself accepts them.
func (s *Stores) Audit(ctx context.Context) (*audit.Log, error) {
	if s.audit != nil {
		return s.audit, nil
	}
	opts := audit.Options{}
	key, err := ExistingKey(s.cfg)
	switch {
	case err != nil:
		return nil, err
	case key != nil:
		opts = AuditOptions(s.cfg, key, Network(s.cfg))
	}
	log, err := audit.New(ctx, s.db, opts)
	if err != nil {
		return nil, err
	}
	s.audit, s.closers = log, append(s.closers, func() { log.Close() })
	return log, nil
}

// Close closes the stores opened and the database.
func (s *Stores) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.db.Close()
}
