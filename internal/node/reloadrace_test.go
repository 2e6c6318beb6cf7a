package node_test

import (
	"context"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// A reload while the console verifies the audit log: the console reads
// the settings the reload replaces, and neither sees the other's half
// (go test -race reports a read of the settings without the reload's
// lock).
func TestReloadWhileTheConsoleVerifiesTheAuditLog(t *testing.T) {
	var cfg config.Config
	n, _ := startNodeOpts(t, func(c *config.Config) { cfg = *c })
	ctx := context.Background()
	src := n.ConsoleSource() // as the console is built, at start
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 20 {
			if _, err := src.VerifyAudit(ctx); err != nil {
				t.Errorf("verify: %v", err)
				return
			}
		}
	})
	for i := range 20 {
		next := cfg
		next.IdentityRate = float64(i + 1)
		if _, err := n.Reload(ctx, next); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
