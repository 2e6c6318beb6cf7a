package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
)

// A reload removing an operator takes the role away in one step, for
// every check that asks for it: while the reload runs, the operator may
// still read others' tasks and approve, or may do neither. Here the
// operator's signed approval passed the task service's check and waits
// (proposals.PointApproving) for the reload to be in its middle (when it
// logs the change of http_allowed_origins); there the operator reads the
// proposer's task, then the approval goes on to the executor. Were the
// task service's operators set before the policy holder's, the read
// would be refused (the role gone) and the approval carried out (the
// role still there).
func TestReloadRemovesAnOperatorForEveryCheckAtOnce(t *testing.T) {
	var (
		r        *heldRig
		readCode = -1 // the operator's tasks/get in the reload's middle
		middle   = make(chan struct{})
		release  = make(chan struct{})
		reloaded = make(chan error, 1)
		once     sync.Once
		paused   bool // the approval reached PointApproving
	)
	read := func() int {
		b, err := json.Marshal(map[string]any{"taskId": r.held.ID})
		if err != nil {
			t.Error(err)
			return -1
		}
		raw := signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: r.op.Address(identity.Mainnet), To: r.n.Address(),
			Type: snap.TypeRequest, Method: "tasks/get", Payload: b, Timestamp: time.Now().Unix()}, r.op)
		return int(errorCode(postSNAP(t, r.n, raw)))
	}
	handler := hookHandler{msg: "http_allowed_origins changed", once: new(sync.Once), hook: func() {
		readCode = read()
		close(middle)
		<-release
	}}
	pause := node.WithPause(func(point string) {
		if point != proposals.PointApproving {
			return
		}
		once.Do(func() {
			paused = true
			next := r.cfg
			next.Operators = nil
			next.HTTPAllowedOrigins = []string{"https://console.example"}
			go func() { _, err := r.n.Reload(context.Background(), next); reloaded <- err }()
			select {
			case <-middle:
			case err := <-reloaded:
				t.Errorf("the reload ended (%v) without logging the change of http_allowed_origins", err)
				reloaded <- err
			}
		})
	})
	r = newHeldRigLogged(t, testdb.SQLite(t), slog.New(handler), pause)

	p := postSNAP(t, r.n, r.send(t, r.op, decisionMsg(r.held.ID, map[string]any{"decision": "approve"})))
	close(release)
	if !paused {
		t.Fatalf("the approval never reached the executor: %v", p)
	}
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(r.dataDir, "sandbox", "a.txt"))
	approved := errorCode(p) == 0 && os.IsNotExist(statErr)
	readable := readCode == 0
	if approved != readable {
		t.Fatalf("in the reload's middle the operator could read the proposer's task: %v (answer %d); could approve its action: %v (answer %d)", readable, readCode, approved, errorCode(p))
	}
	if code := read(); code != int(snap.CodeTaskNotFound) {
		t.Errorf("after the reload the removed operator's read of the proposer's task answered %d; want %d", code, snap.CodeTaskNotFound)
	}
}

// A reload refused after its policy loaded (its card does not validate)
// leaves both the operators and the policy in force: the operator still
// reads others' tasks and approves, under the policy it had.
func TestRefusedReloadKeepsOperatorsAndPolicy(t *testing.T) {
	r := newHeldRig(t, testdb.SQLite(t))
	name, version := r.n.PolicyInForce()
	denyAll := filepath.Join(t.TempDir(), "deny.cedar")
	if err := os.WriteFile(denyAll, []byte("forbid (principal, action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := r.cfg
	next.Operators = nil
	next.Policy = denyAll
	next.Card.Name = ""
	if _, err := r.n.Reload(context.Background(), next); !errors.Is(err, node.ErrNotReloaded) {
		t.Fatalf("reload with a card of no name: %v", err)
	}
	if n, v := r.n.PolicyInForce(); n != name || v != version {
		t.Errorf("after a refused reload the policy in force is %s %s; want %s %s", n, v, name, version)
	}
	if !r.n.Tasks.IsOperator(r.op.Address(identity.Mainnet)) {
		t.Error("a refused reload removed the operator")
	}
	p := postSNAP(t, r.n, r.send(t, r.op, decisionMsg(r.held.ID, map[string]any{"decision": "approve"})))
	if code := errorCode(p); code != 0 {
		t.Fatalf("the operator's approval after a refused reload: %v", p)
	}
	if _, err := os.Stat(filepath.Join(r.dataDir, "sandbox", "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("approved, yet the file is still there: %v", err)
	}
}
