package node_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// identityConfig is the settings of a node with its own data folder, on
// the database dsn ("" for the data folder's tasks.db), whose key is in
// keyFile ("" for the data folder's identity.key, made at its first
// start).
func identityConfig(t *testing.T, dsn, keyFile string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
	cfg.Database, cfg.KeyFile = dsn, keyFile
	return cfg
}

// newKeyFile writes a new identity's key to a file of its own.
func newKeyFile(t *testing.T) (string, *identity.Key) {
	t.Helper()
	return sharedKeyFile(t, t.TempDir())
}

// auditHead is the head of the audit log on dsn, read apart from any node.
func auditHead(t *testing.T, dsn string) audit.Anchor {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{Existing: true})
	defer db.Close()
	l, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// recordedIdentity is the address recorded in the database dsn as its
// node's, "" when none is.
func recordedIdentity(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{Existing: true})
	defer db.Close()
	st, err := sqlstore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	addr, err := st.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// refusedAsOther starts a node on cfg, which must refuse, as the
// database of another node (node.ErrOtherIdentity), naming both
// addresses and what to do.
func refusedAsOther(t *testing.T, cfg config.Config, recorded, mine string) {
	t.Helper()
	err := startFails(t, cfg, fmt.Sprintf("a node with the key of %s started on the database of %s", mine, recorded))
	namesOtherIdentity(t, err, recorded, mine)
}

// startFails starts a node on cfg, which must fail (failure says what
// started otherwise), and returns the error.
func startFails(t *testing.T, cfg config.Config, failure string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		cancel()
		_ = n.Wait()
		t.Fatal(failure)
	}
	return err
}

// namesOtherIdentity checks that err, a refused start, is
// node.ErrOtherIdentity naming both addresses and what to do.
func namesOtherIdentity(t *testing.T, err error, recorded, mine string) {
	t.Helper()
	msg := err.Error()
	for _, want := range []string{recorded, mine, "key file", "new data folder"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start: %v; want it to name %q", err, want)
		}
	}
	if !errors.Is(err, node.ErrOtherIdentity) {
		t.Errorf("Start: %v; want node.ErrOtherIdentity", err)
	}
}

// A node started on the database of another node whose audit log was
// never sealed (it stopped with nothing to seal), with its own key: on a
// SQLite file, the first node's tasks.db under another key file; on
// PostgreSQL, the same database from a new data folder, which makes a
// key of its own. It is refused, naming both addresses, before it writes
// anything (the audit log's head is as the first node left it); with the
// first node's key it starts. Before, it started and carried the first
// node's tasks, jobs and audit log on under its own address.
func TestStartRefusesAnotherNodesDatabase(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := ""
			if dialect == "postgres" {
				dsn = testdb.Postgres(t)
			}
			first := identityConfig(t, dsn, "")
			n, stop := startConfigured(t, first, slog.New(slog.DiscardHandler))
			owner := n.Address()
			stop()
			db := first.DatabaseDSN()
			before := auditHead(t, db)
			if before.Seq != 0 {
				t.Fatalf("the first node's audit log has %d entries; want a log never sealed", before.Seq)
			}

			if dialect == "sqlite" {
				// The first node's data folder, another key file.
				other := first
				keyFile, k := newKeyFile(t)
				other.KeyFile = keyFile
				refusedAsOther(t, other, owner, k.Address(identity.Mainnet))
			} else {
				// A new data folder, whose key is made at its start.
				refusedAsOtherAnyKey(t, identityConfig(t, dsn, ""), owner)
			}
			if after := auditHead(t, db); after != before {
				t.Errorf("the refused start wrote to the audit log: head %+v, was %+v", after, before)
			}
			if got := recordedIdentity(t, db); got != owner {
				t.Errorf("the database records %q; want %s", got, owner)
			}

			// The first node's key: it starts.
			n, stop = startConfigured(t, first, slog.New(slog.DiscardHandler))
			if n.Address() != owner {
				t.Errorf("address %s, want %s", n.Address(), owner)
			}
			stop()
		})
	}
}

// refusedAsOtherAnyKey is refusedAsOther for a node whose key is made at
// its start, in its data folder: its address is read back from there.
func refusedAsOtherAnyKey(t *testing.T, cfg config.Config, recorded string) {
	t.Helper()
	err := startFails(t, cfg, fmt.Sprintf("a node with a new key started on the database of %s", recorded))
	k, kerr := identity.LoadKeyFile(cfg.KeyPath())
	if kerr != nil {
		t.Fatalf("the new folder's key: %v (start: %v)", kerr, err)
	}
	namesOtherIdentity(t, err, recorded, k.Address(identity.Mainnet))
}

// previousSchema migrates the database dsn as the build before the
// record of the node's identity did: the task store's migrations but the
// last (the node's data besides are those of the other components, which
// the node migrates at its start).
func previousSchema(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{})
	defer db.Close()
	src := os.DirFS("../../tasks/sqlstore/migrations")
	older := fstest.MapFS{}
	for _, dialect := range []string{"sqlite", "postgres"} {
		names, err := fs.Glob(src, dialect+"/*.sql")
		if err != nil || len(names) < 2 {
			t.Fatalf("migrations of %s: %v %v", dialect, names, err)
		}
		for _, name := range names[:len(names)-1] {
			b, err := fs.ReadFile(src, name)
			if err != nil {
				t.Fatal(err)
			}
			older[name] = &fstest.MapFile{Data: b}
		}
		if last := names[len(names)-1]; !strings.Contains(last, "identity") {
			t.Fatalf("the last migration of %s is %s; want the one recording the node's identity", dialect, last)
		}
	}
	if err := db.Migrate(ctx, sqldb.Migrations{FS: older, Component: "tasks"}); err != nil {
		t.Fatal(err)
	}
}

// A database of the previous schema, without the record: the first start
// after the upgrade records its key's address (when the audit log's
// seals name no other key), and a later start with another key is
// refused. A database whose log another key sealed is refused at that
// first start (audit.ErrOtherKey) and nothing is recorded, so that the
// key that sealed it starts on it afterwards, and is recorded.
func TestIdentityRecordedAtTheFirstStartAfterTheUpgrade(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	testdb.Each(t, func(t *testing.T, dsn string) {
		t.Run("unsealed", func(t *testing.T) {
			dsn := another(t, dsn)
			previousSchema(t, dsn)
			if got := recordedIdentityRaw(t, dsn); got != "" {
				t.Fatalf("a database of the previous schema records %q", got)
			}
			keyFile, k := newKeyFile(t)
			owner := k.Address(identity.Mainnet)
			_, stop := startConfigured(t, identityConfig(t, dsn, keyFile), slog.New(slog.DiscardHandler))
			stop()
			if got := recordedIdentity(t, dsn); got != owner {
				t.Fatalf("after the first start the database records %q; want %s", got, owner)
			}
			otherFile, other := newKeyFile(t)
			refusedAsOther(t, identityConfig(t, dsn, otherFile), owner, other.Address(identity.Mainnet))
		})
		t.Run("sealed by another key", func(t *testing.T) {
			dsn := another(t, dsn)
			previousSchema(t, dsn)
			_, sealer := newKeyFile(t)
			signedEntry(t, dsn, sealer, true)

			keyFile, k := newKeyFile(t)
			err := startFails(t, identityConfig(t, dsn, keyFile), "a node started on a database whose log another key sealed")
			if !errors.Is(err, audit.ErrOtherKey) || !strings.Contains(err.Error(), k.Address(identity.Mainnet)) {
				t.Errorf("Start: %v; want audit.ErrOtherKey naming %s", err, k.Address(identity.Mainnet))
			}
			if got := recordedIdentity(t, dsn); got != "" {
				t.Fatalf("the refused start recorded %q", got)
			}
			// The key that sealed it: it starts, and is recorded.
			sealerFile := filepath.Join(t.TempDir(), "sealer.key")
			if err := identity.SaveKeyFile(sealerFile, sealer); err != nil {
				t.Fatal(err)
			}
			_, stop := startConfigured(t, identityConfig(t, dsn, sealerFile), slog.New(slog.DiscardHandler))
			stop()
			if got, want := recordedIdentity(t, dsn), sealer.Address(identity.Mainnet); got != want {
				t.Errorf("the database records %q; want %s", got, want)
			}
		})
	})
}

// forgetIdentity deletes the record of the node's address from the
// database dsn, as in a database made by a build before the record.
func forgetIdentity(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{Existing: true})
	defer db.Close()
	if _, err := db.W.ExecContext(ctx, "DELETE FROM node_identity"); err != nil {
		t.Fatal(err)
	}
}

// openDB opens the database dsn with opts, apart from any node.
func openDB(t *testing.T, dsn string, opts sqldb.Options) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// signedEntry appends an entry to the audit log of the database dsn,
// signed by key, and seals the log if seal is set, apart from any node.
func signedEntry(t *testing.T, dsn string, key *identity.Key, seal bool) {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{})
	defer db.Close()
	l, err := audit.New(ctx, db, audit.Options{Signer: audit.IdentitySigner(key, identity.Mainnet)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
		t.Fatal(err)
	}
	if seal {
		if _, err := l.Seal(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// another is a new database of the dialect of dsn.
func another(t *testing.T, dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return testdb.SQLite(t)
	}
	return testdb.Postgres(t)
}

// recordedIdentityRaw is recordedIdentity without migrating the database
// (of the previous schema, it has no table for the record): "" when the
// table is not there.
func recordedIdentityRaw(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, dsn, sqldb.Options{Existing: true})
	defer db.Close()
	var addr string
	if err := db.R.QueryRowContext(ctx, "SELECT address FROM node_identity").Scan(&addr); err != nil {
		return ""
	}
	return addr
}

// Replicas on one PostgreSQL database share one identity: two started
// at once with the same key both start (one records it, the other finds
// it recorded), and a third with another key is refused while they run.
func TestReplicasShareTheDatabasesIdentity(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	dsn := testdb.Postgres(t)
	keyFile, k := sharedKeyFile(t, t.TempDir())
	owner := k.Address(identity.Mainnet)
	type started struct {
		n   *node.Node
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan started, 2)
	for range 2 {
		cfg := identityConfig(t, dsn, keyFile)
		go func() {
			n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
			out <- started{n, err}
		}()
	}
	var nodes []*node.Node
	for range 2 {
		s := <-out
		if s.err != nil {
			t.Errorf("a replica with the database's key: %v", s.err)
			continue
		}
		nodes = append(nodes, s.n)
	}
	defer func() {
		cancel()
		for _, n := range nodes {
			if err := n.Wait(); err != nil {
				t.Errorf("replica stopped with %v", err)
			}
		}
	}()
	if got := recordedIdentity(t, dsn); got != owner {
		t.Errorf("the database records %q; want %s", got, owner)
	}
	otherFile, other := newKeyFile(t)
	refusedAsOther(t, identityConfig(t, dsn, otherFile), owner, other.Address(identity.Mainnet))
}

// The same key on the other network is another address: a node moved
// from mainnet to testnet on its database is refused, the error saying
// that the network changed, not the key.
func TestStartRefusesTheDatabaseOnTheOtherNetwork(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	keyFile, k := newKeyFile(t)
	cfg := identityConfig(t, "", keyFile)
	_, stop := startConfigured(t, cfg, slog.New(slog.DiscardHandler))
	stop()
	cfg.Testnet = true
	startRefused(t, cfg, "on testnet on its mainnet database", k.Address(identity.Mainnet), k.Address(identity.Testnet), "testnet changed")
	cfg.Testnet = false
	_, stop = startConfigured(t, cfg, slog.New(slog.DiscardHandler))
	stop()
}
