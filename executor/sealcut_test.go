package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testdb"
)

// The entries of an action, written with its record in one commit
// (audit.Log.AppendTx), are the log's own: cut after the last seal with
// the head record moved back while the node runs, the next seal refuses
// to cover the shorter chain. Before, the log knew only the entries it
// wrote outside the executor's commits, and sealed it.
func TestSealRefusesActionEntriesCut(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		k, err := identity.FromHex(strings.Repeat("22", 32))
		if err != nil {
			t.Fatal(err)
		}
		v := newEnv(t, dsn)
		v.signer = audit.IdentitySigner(k, identity.Mainnet)
		v.reopen()
		v.file("a.txt", "a\n")
		wantOutcome(t, v.run(agent, prop("READ_FILE", map[string]string{"path": "/sandbox/a.txt"})), executor.Completed)
		s, err := v.log.Seal(ctx)
		if err != nil || s.Seq == 0 {
			t.Fatalf("Seal: %+v, %v", s, err)
		}
		wantOutcome(t, v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b\n"})), executor.Completed)
		head, err := v.log.Head(ctx)
		if err != nil || head.Seq <= s.Seq {
			t.Fatalf("Head: %+v, %v", head, err)
		}
		if _, err := v.db.W.ExecContext(ctx, v.db.Dialect.Rebind("DELETE FROM audit_log WHERE seq > ?"), s.Seq); err != nil {
			t.Fatal(err)
		}
		if _, err := v.db.W.ExecContext(ctx, fmt.Sprintf("UPDATE audit_head SET last_seq = %d, last_hash = '%s' WHERE id = 1", s.Seq, sealHash(t, v, s.Seq))); err != nil {
			t.Fatal(err)
		}
		v.verify() // the shorter chain holds
		_, err = v.log.Seal(ctx)
		var ve *audit.VerifyError
		if !errors.As(err, &ve) || ve.Kind != audit.KindTruncated || ve.Seq != s.Seq+1 {
			t.Fatalf("Seal after the action's entries were cut: %v; want truncated at entry %d", err, s.Seq+1)
		}
	})
}

// sealHash is the hash of entry seq.
func sealHash(t *testing.T, v *env, seq int64) string {
	t.Helper()
	es, err := v.log.Query(context.Background(), audit.Filter{AfterSeq: seq - 1, Limit: 1})
	if err != nil || len(es) != 1 {
		t.Fatalf("Query: %v, %v", es, err)
	}
	return es[0].Hash
}
