package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks"
)

// OpenStores reaches the stores of a node's database without creating
// one: a missing SQLite file or a memory database is an error, and the
// stores of an existing database open, read and close.
func TestOpenStores(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()

	_, err := node.OpenStores(ctx, cfg, nil)
	if !errors.Is(err, node.ErrNoDatabase) {
		t.Fatalf("no database: %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "tasks.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a database was created where none was: %v", err)
	}
	mem := cfg
	mem.Database = config.MemoryDatabase
	if _, err := node.OpenStores(ctx, mem, nil); !errors.Is(err, node.ErrMemoryDatabase) {
		t.Fatalf("memory: %v, want ErrMemoryDatabase", err)
	}

	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := node.OpenStores(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := st.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := ts.List(ctx, tasks.Filter{}); err != nil || len(list) != 0 {
		t.Errorf("tasks of a new node: %v, %v", list, err)
	}
	if again, err := st.Tasks(ctx); err != nil || again != ts {
		t.Errorf("a second Tasks opened another store: %v", err)
	}
	jobs, err := st.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := jobs.List(ctx, 0); err != nil || len(list) != 0 {
		t.Errorf("jobs of a new node: %v, %v", list, err)
	}
	log, err := st.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := log.Verify(ctx); err != nil || rep.Entries != 0 {
		t.Errorf("audit log of a new node: %+v, %v", rep, err)
	}
}

// A data folder a restore stopped midway in (its journal there) is
// refused, the error naming the journal and saying to run the restore
// again, as Start refuses it.
func TestOpenStoresUnfinishedRestore(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	journal := filepath.Join(cfg.DataDir, backup.JournalName)
	if err := os.WriteFile(journal, []byte(`{"backup":"/elsewhere/backup"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := node.OpenStores(ctx, cfg, nil)
	if err == nil {
		st.Close()
	}
	if !errors.Is(err, node.ErrUnfinishedRestore) || !strings.Contains(err.Error(), journal) || !strings.Contains(err.Error(), "Run the same restore again") {
		t.Fatalf("OpenStores with a restore's journal there: %v; want ErrUnfinishedRestore naming it", err)
	}
}
