package snap_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// failingReplay is a replay store whose database cannot be reached.
type failingReplay struct{ snap.ReplayStore }

var errDatabaseDown = errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")

func (failingReplay) Remember(context.Context, string, string, snap.ReplayRecord) (snap.ReplayRecord, bool, error) {
	return snap.ReplayRecord{}, false, errDatabaseDown
}

// A replay store that fails is an internal fault: the requester gets 5001
// without its text (which names the database's address), and the operator
// finds the failure in the log; the Validator's error wraps it.
func TestReplayStoreFailureStaysWithTheOperator(t *testing.T) {
	ctx := context.Background()
	v := snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: failingReplay{}})
	if _, err := v.Validate(ctx, signed(t, "down", t0)); !errors.Is(err, errDatabaseDown) {
		t.Fatalf("Validate: %v, want an error wrapping the store's", err)
	}

	var logs bytes.Buffer
	s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: snap.NewRouter(), Now: at(t0),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Validator: v})
	client := snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
	resp := s.Respond(ctx, snap.Inbound{Raw: request(t, "down-2", "message/send", sendText)})
	p := check(t, client, resp, "message/send")
	if c, _ := errorCode(p); c != int(snap.CodeInternal) {
		t.Fatalf("answer %v, want 5001", p)
	}
	if strings.Contains(string(resp.Payload), "10.0.0.5") {
		t.Fatalf("the answer names the database: %s", resp.Payload)
	}
	if !strings.Contains(logs.String(), "10.0.0.5:5432") {
		t.Fatalf("the log does not say why:\n%s", logs.String())
	}
}
