package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// Run verifies the copy's audit log as Check does and as the node does:
// its seals and checkpoints signed by the node's key, the manifest's
// address. Before, Run accepted any one signer, and an unsigned
// checkpoint: a log sealed by another key, or pruned behind a checkpoint
// that someone without the node's key wrote, was backed up with no
// error, into a backup that `backup --check` then refused, found out
// only at restore time.
func TestRunRefusesAuditLogNotSignedByTheNode(t *testing.T) {
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts func(now func() time.Time) audit.Options
		act  func(ctx context.Context, l *audit.Log) error
		kind audit.Kind
	}{
		{"sealed by another key", func(now func() time.Time) audit.Options {
			return audit.Options{Now: now, Signer: audit.IdentitySigner(other, identity.Mainnet)}
		}, func(ctx context.Context, l *audit.Log) error { _, err := l.Seal(ctx); return err }, audit.KindSeal},
		{"pruned behind an unsigned checkpoint", func(now func() time.Time) audit.Options {
			return audit.Options{Now: now, Retain: time.Hour}
		}, func(ctx context.Context, l *audit.Log) error { _, err := l.Prune(ctx); return err }, audit.KindCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := dataDir(t, 3)
			ctx := context.Background()
			db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			later := func() time.Time { return time.Now().Add(48 * time.Hour) }
			l, err := audit.New(ctx, db, tc.opts(later))
			if err != nil {
				db.Close()
				t.Fatal(err)
			}
			err = tc.act(ctx, l)
			l.Close()
			db.Close()
			if err != nil {
				t.Fatal(err)
			}

			out := filepath.Join(t.TempDir(), "backup")
			_, err = backup.Run(ctx, cfg, out, opts())
			var ve *audit.VerifyError
			if !errors.As(err, &ve) || ve.Kind != tc.kind {
				t.Fatalf("Run = %v; want a *audit.VerifyError of kind %s", err, tc.kind)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the output folder exists after the refusal: %v", err)
			}
		})
	}
}
