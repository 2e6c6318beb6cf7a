package node_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/snap"
)

// heldRig is a node on a database, with an operator, whose proposer wrote
// /sandbox/a.txt and proposed to delete it: the delete waits for a
// decision (held, input_required).
type heldRig struct {
	n            *node.Node
	dataDir      string
	cfg          config.Config // the node's settings
	proposer, op *identity.Key
	held         taskView
}

// newHeldRig starts a heldRig on the database dsn, with opts.
func newHeldRig(t *testing.T, dsn string, opts ...node.Option) *heldRig {
	t.Helper()
	return newHeldRigLogged(t, dsn, slog.New(slog.DiscardHandler), opts...)
}

// newHeldRigLogged is newHeldRig with a node logging to logger.
func newHeldRigLogged(t *testing.T, dsn string, logger *slog.Logger, opts ...node.Option) *heldRig {
	t.Helper()
	r := &heldRig{dataDir: filepath.Join(t.TempDir(), "data")}
	var err error
	if r.proposer, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	if r.op, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.RelayListen, cfg.HTTPListen, cfg.Database, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", dsn, r.dataDir
	cfg.Operators = []string{r.op.Address(identity.Mainnet)}
	r.cfg = cfg
	r.n, _ = startConfigured(t, cfg, logger, opts...)
	if w := taskOf(t, postSNAP(t, r.n, r.send(t, r.proposer, proposal("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "x\n"})))); w.Status.State != "completed" {
		t.Fatalf("write: %s %q", w.Status.State, w.Status.Message)
	}
	r.held = taskOf(t, postSNAP(t, r.n, r.send(t, r.proposer, proposal("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"}))))
	if r.held.Status.State != "input_required" {
		t.Fatalf("delete: %s %q", r.held.Status.State, r.held.Status.Message)
	}
	return r
}

// send returns a message/send to the rig's node carrying payload, signed
// by k, as its HTTP body.
func (r *heldRig) send(t *testing.T, k *identity.Key, payload any) []byte {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet), To: r.n.Address(),
		Type: snap.TypeRequest, Method: "message/send", Payload: b, Timestamp: time.Now().Unix()}, k)
}
