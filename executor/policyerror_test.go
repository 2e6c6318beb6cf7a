package executor_test

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestFailingConfirmPermitHolds: a proposer who picks a content size that
// makes a @confirm permit's condition fail (a Long overflow from 1000
// bytes on) still has the write held for an operator, where a plain
// permit also matches; and a failing forbid blocks. Before, the plain
// permit alone decided and the write was promoted without confirmation.
// The forbid's condition cannot hold without failing (its product is
// positive or overflows a Long), so only its failure can block.
func TestFailingConfirmPermitHolds(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	e, err := policy.Parse("overflow.cedar", []byte(`
@id("writes") permit (principal, action, resource);
@id("big-writes") @confirm("a large write")
permit (principal, action == Action::"WRITE_FILE", resource) when { context.size * 10000000000000000 > 1000000000000000000 };
@id("no-big-dirs") forbid (principal, action == Action::"CREATE_DIRECTORY", resource in Path::"/sandbox/big/") when { context.riskLevel * 9000000000000000000 < 0 };
`))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(e)
	res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/big.txt", "content": strings.Repeat("x", 1000)}))
	wantOutcome(t, res, executor.NeedsConfirmation)
	if _, ok := v.content("big.txt"); ok {
		t.Error("big.txt written before confirmation")
	}
	res = v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/small.txt", "content": "x"}))
	wantOutcome(t, res, executor.Completed)
	res = v.run(agent, prop("CREATE_DIRECTORY", map[string]string{"path": "/sandbox/big"}))
	wantOutcome(t, res, executor.Failed)
	if code := errorCode(t, res.Output); code != executor.CodeActionNotAllowed || !strings.Contains(string(res.Output), "no-big-dirs") {
		t.Errorf("failing forbid: output %s", res.Output)
	}
}
