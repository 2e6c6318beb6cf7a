package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// The node applies audit.retain_days: at start its audit log loses the
// entries past retention that a seal covers, behind a checkpoint its
// identity key signs, and still verifies; with retain_days 0 it keeps
// everything. At a clean stop it seals its head: nothing is left
// unsealed, the entries a crash left unsealed included.
func TestAuditRetentionAtStart(t *testing.T) {
	for _, c := range []struct {
		name       string
		retainDays int
		first      int64 // the first entry kept
	}{
		{"default 30 days", 30, 6},
		{"kept forever", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dataDir := filepath.Join(t.TempDir(), "data")
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			// The identity whose log it is (a log without its key is
			// refused at start).
			k, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			if err := identity.SaveKeyFile(filepath.Join(dataDir, "identity.key"), k); err != nil {
				t.Fatal(err)
			}
			// Entries 1…5 written 40 days ago and sealed (6), 7…9 ten days
			// ago, left unsealed by a crash.
			now := time.Now()
			appendAt := func(at time.Time, n int, seal bool) {
				db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				l, err := audit.New(ctx, db, audit.Options{Now: func() time.Time { return at }, Signer: audit.IdentitySigner(k, identity.Mainnet)})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				for range n {
					if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
						t.Fatal(err)
					}
				}
				if seal {
					if _, err := l.Seal(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			appendAt(now.Add(-40*24*time.Hour), 5, true)
			appendAt(now.Add(-10*24*time.Hour), 3, false)

			var cfg config.Config
			n, stop := startNode(t, func(cf *config.Config) {
				cf.DataDir, cf.Audit.RetainDays = dataDir, c.retainDays
				cfg = *cf
			})
			addr := n.Address()
			stop()

			db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			key, err := node.ExistingKey(cfg)
			if err != nil || key == nil {
				t.Fatalf("node key: %v", err)
			}
			l, err := audit.New(ctx, db, node.AuditOptions(cfg, key, identity.Mainnet))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rep, err := l.Verify(ctx)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if rep.First != c.first || rep.Checkpoint.Seq != c.first-1 {
				t.Errorf("the chain starts at %d after checkpoint %d; want %d", rep.First, rep.Checkpoint.Seq, c.first)
			}
			if wantSigner := map[bool]string{true: addr, false: ""}[c.first > 1]; rep.CheckpointSigner != wantSigner {
				t.Errorf("checkpoint signer %q, want %q", rep.CheckpointSigner, wantSigner)
			}
			if rep.Unsealed != 0 || rep.LastSeal.Seq != rep.Last || rep.LastSeal.Signer != addr {
				t.Errorf("after a clean stop: last seal %+v, %d entries unsealed; want the head sealed by %s", rep.LastSeal, rep.Unsealed, addr)
			}
		})
	}
}

// The [audit] levels reach the executor: with MEDIUM at SUMMARY a write's
// entries keep its path and no content hash; at the default (DETAILED)
// they keep the hashes.
func TestAuditLevelSetting(t *testing.T) {
	for _, c := range []struct {
		level      string
		wantHashes bool
	}{{"SUMMARY", false}, {"DETAILED", true}} {
		t.Run(c.level, func(t *testing.T) {
			ctx := context.Background()
			dataDir := filepath.Join(t.TempDir(), "data")
			n, stop := startNode(t, func(cf *config.Config) { cf.DataDir, cf.Audit.LevelMedium = dataDir, c.level })
			alice := newRequester(t, n.RelayURLs())
			w := taskOf(t, alice.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/n.txt", "content": "x\n"}), false))
			if w.Status.State != "completed" {
				t.Fatalf("write: %s", w.Status.State)
			}
			stop()
			db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			l, err := audit.New(ctx, db, audit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			es, err := l.Query(ctx, audit.Filter{Task: w.ID})
			if err != nil {
				t.Fatal(err)
			}
			promoted := false
			for _, e := range es {
				if e.Step == audit.StepPromoted {
					promoted = true
					if got := e.PostHash != ""; got != c.wantHashes {
						t.Errorf("promoted entry at %s: post hash %q", c.level, e.PostHash)
					}
				}
			}
			if !promoted {
				t.Fatalf("no promoted entry among %d", len(es))
			}
		})
	}
}
