package tasks_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// claimRig is what the tests of replay claims through a snap.Server
// share: the node's and a peer's keys and a clock stopped at t0.
type claimRig struct {
	node, peer *identity.Key
	self       string // the node's address
	t0         time.Time
}

func newClaimRig(t *testing.T) *claimRig {
	t.Helper()
	r := &claimRig{t0: time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)}
	var err error
	if r.node, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	if r.peer, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	r.self = r.node.Address(identity.Mainnet)
	return r
}

// now is the rig's clock.
func (r *claimRig) now() time.Time { return r.t0 }

// server is a snap.Server of the node serving router, with replay and
// results, that leaves message/send's replay record to its handler.
func (r *claimRig) server(router *snap.Router, replay snap.ReplayStore, results snap.ResultStore) *snap.Server {
	return r.serverClaiming(router, replay, results, "message/send")
}

// serverClaiming is server leaving the replay records of methods to
// their handlers.
func (r *claimRig) serverClaiming(router *snap.Router, replay snap.ReplayStore, results snap.ResultStore, methods ...string) *snap.Server {
	return snap.NewServer(snap.ServerConfig{Key: r.node, Router: router, Now: r.now, Logger: slog.New(slog.DiscardHandler), Results: results,
		Validator: snap.NewValidator(snap.Config{Self: r.self, Now: r.now, Replay: replay, ClaimMethods: methods})})
}

// request is a message/send of the peer's to the node carrying payload,
// signed and serialized.
func (r *claimRig) request(t *testing.T, payload string) []byte {
	t.Helper()
	return r.call(t, "message/send", payload)
}

// call is a request of the peer's to the node of method carrying
// payload, signed and serialized.
func (r *claimRig) call(t *testing.T, method, payload string) []byte {
	t.Helper()
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: method,
		From: r.peer.Address(identity.Mainnet), To: r.self, Timestamp: r.t0.Unix(), Payload: []byte(payload)}
	if err := m.Sign(r.peer); err != nil {
		t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
