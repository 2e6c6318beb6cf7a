package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// pendingAction is the id of the action task waits on, as its status
// message names it ("confirmation needed for action ID: …").
func pendingAction(t *testing.T, task taskView) string {
	t.Helper()
	_, rest, ok := strings.Cut(task.Status.Message, "for action ")
	id, _, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || id == "" {
		t.Fatalf("no action id in the status %q", task.Status.Message)
	}
	return id
}

// decisionMsg is a message/send payload continuing taskID with an
// operator's decision.
func decisionMsg(taskID string, data map[string]any) map[string]any {
	return map[string]any{"taskId": taskID, "message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"data": data}}}}
}

// errField returns the error code and its data's field and constraint.
func errField(p map[string]any) (code int, field, constraint string) {
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	field, _ = d["field"].(string)
	constraint, _ = d["constraint"].(string)
	return errCode(p), field, constraint
}

// Operators decide on held actions with signed messages over the relay:
// the proposer — an operator itself — may not approve its own delete; a
// stranger to the task is told it does not exist; malformed decisions are
// refused naming the field; another operator approves (the file goes) or
// denies (the task fails with its reason); the audit log names the
// approver.
func TestOperatorDecisionsOverRelay(t *testing.T) {
	keys := make([]*identity.Key, 3)
	for i := range keys {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	proposerAddr, opAddr := keys[0].Address(identity.Mainnet), keys[1].Address(identity.Mainnet)
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Operators = []string{proposerAddr, opAddr}
	})
	proposer := newRequesterWith(t, n.RelayURLs(), keys[0])
	op := newRequesterWith(t, n.RelayURLs(), keys[1])
	stranger := newRequesterWith(t, n.RelayURLs(), keys[2])
	file := filepath.Join(dataDir, "sandbox", "a.txt")

	if w := taskOf(t, proposer.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "x\n"}), false)); w.Status.State != "completed" {
		t.Fatalf("write: %s %q", w.Status.State, w.Status.Message)
	}
	d := taskOf(t, proposer.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"}), false))
	if d.Status.State != "input_required" {
		t.Fatalf("delete: %s %q", d.Status.State, d.Status.Message)
	}

	refusals := []struct {
		name             string
		who              *requester
		data             map[string]any
		code             int
		field, construal string
	}{
		{"the proposer, an operator, approves its own", proposer, map[string]any{"decision": "approve"}, 1004, "payload.message.parts[0].data.decision", "approver"},
		{"a stranger approves", stranger, map[string]any{"decision": "approve"}, 1001, "", ""},
		{"not a decision word", op, map[string]any{"decision": "maybe"}, 1004, "payload.message.parts[0].data.decision", "enum"},
		{"decision not a string", op, map[string]any{"decision": true}, 1004, "payload.message.parts[0].data.decision", "type"},
		{"another action", op, map[string]any{"decision": "approve", "actionId": "not-the-one"}, 1004, "payload.message.parts[0].data.actionId", "pending action"},
		{"unknown member", op, map[string]any{"decision": "approve", "force": true}, 1004, "payload.message.parts[0].data.force", "additionalProperties"},
		{"reason too long", op, map[string]any{"decision": "deny", "reason": strings.Repeat("r", 1025)}, 1004, "payload.message.parts[0].data.reason", "maxLength"},
		{"a diff sum not in hex", op, map[string]any{"decision": "approve", "diffSha256": "ABC"}, 1004, "payload.message.parts[0].data.diffSha256", "pattern"},
		{"another diff", op, map[string]any{"decision": "approve", "diffSha256": strings.Repeat("0", 64)}, 1004, "payload.message.parts[0].data.diffSha256", "diff"},
	}
	for _, r := range refusals {
		p := r.who.call(t, n, "message/send", decisionMsg(d.ID, r.data), false)
		code, field, constraint := errField(p)
		if code != r.code || field != r.field || constraint != r.construal {
			t.Errorf("%s: got %d %q %q, want %d %q %q (%v)", r.name, code, field, constraint, r.code, r.field, r.construal, p)
		}
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("%s: the file went: %v", r.name, err)
		}
	}
	if got := taskOf(t, proposer.call(t, n, "tasks/get", map[string]any{"taskId": d.ID}, false)); got.Status.State != "input_required" {
		t.Fatalf("after the refusals the task is %s", got.Status.State)
	}

	// Another operator approves the diff it was shown (its sum, as the
	// node's admin socket lists it): the delete is promoted.
	res, err := admin.Call(context.Background(), admin.Path(dataDir), admin.Request{Op: "held", Task: d.ID, WithDiff: true})
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Actions []struct {
			Diff string `json:"diff"`
			Sum  string `json:"diff_sha256"`
		}
	}
	err = json.Unmarshal(res, &page)
	heldList := page.Actions
	if err != nil || len(heldList) != 1 || !strings.Contains(heldList[0].Diff, "a.txt") || len(heldList[0].Sum) != 64 {
		t.Fatalf("held: %s %v", res, err)
	}
	// A remote operator finds the same sum from the task: the SHA-256 of
	// its pending-changes artifact's text.
	var shown string
	for _, a := range d.Artifacts {
		if strings.HasPrefix(a.ArtifactID, "pending-") && len(a.Parts) == 1 && a.Parts[0].Text != nil {
			shown = *a.Parts[0].Text
		}
	}
	if sum := sha256.Sum256([]byte(shown)); hex.EncodeToString(sum[:]) != heldList[0].Sum {
		t.Fatalf("the task's pending diff %q does not sum to %s", shown, heldList[0].Sum)
	}
	done := taskOf(t, op.call(t, n, "message/send", decisionMsg(d.ID, map[string]any{"decision": "approve", "diffSha256": heldList[0].Sum}), false))
	if done.Status.State != "completed" {
		t.Fatalf("approved: %s %q", done.Status.State, done.Status.Message)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a.txt after an approved delete: %v", err)
	}
	if got := taskOf(t, proposer.call(t, n, "tasks/get", map[string]any{"taskId": d.ID}, false)); got.Status.State != "completed" {
		t.Fatalf("the proposer sees %s", got.Status.State)
	}
	// The task has ended: a second decision is refused, naming its state.
	second := op.call(t, n, "message/send", decisionMsg(d.ID, map[string]any{"decision": "deny"}), false)
	if code, field, constraint := errField(second); code != 1004 || field != "payload.taskId" || constraint != "state" {
		t.Errorf("a second decision: %d %q %q", code, field, constraint)
	}
	if data, _ := second["error"].(map[string]any)["data"].(map[string]any); data["state"] != "completed" || data["taskId"] != d.ID {
		t.Errorf("a second decision's data: %v", second)
	}

	// A denial fails the task with the operator's reason.
	if w := taskOf(t, proposer.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/b.md", "content": "# b\n"}), false)); w.Status.State != "completed" {
		t.Fatalf("write b: %s", w.Status.State)
	}
	r := taskOf(t, proposer.call(t, n, "message/send", proposal("RENAME_FILE", map[string]any{"source": "/sandbox/b.md", "destination": "/sandbox/c.md"}), false))
	denied := taskOf(t, op.call(t, n, "message/send", decisionMsg(r.ID, map[string]any{"decision": "deny", "reason": "keep the name"}), false))
	if denied.Status.State != "failed" || !strings.Contains(denied.Status.Message, "keep the name") {
		t.Fatalf("denied: %s %q", denied.Status.State, denied.Status.Message)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandbox", "b.md")); err != nil {
		t.Fatalf("b.md after a denied rename: %v", err)
	}

	// A decision sent as message/stream is carried out too, answered at
	// once with the task and no event.
	held := taskOf(t, proposer.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/b.md"}), false))
	body, _ := json.Marshal(decisionMsg(held.ID, map[string]any{"decision": "approve", "actionId": pendingAction(t, held)}))
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	events := 0
	resp, err := op.client.RequestStream(sctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
		client.NostrRequest{Method: "message/stream", Payload: body}, func(*client.NostrResponse) error { events++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	var sp map[string]any
	if err := json.Unmarshal(resp.Payload, &sp); err != nil {
		t.Fatal(err)
	}
	if s := taskOf(t, sp); s.Status.State != "completed" || events != 0 {
		t.Fatalf("decision over message/stream: %s after %d events", s.Status.State, events)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandbox", "b.md")); !os.IsNotExist(err) {
		t.Fatalf("b.md after an approved delete: %v", err)
	}

	// The audit log says who decided.
	stop()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := map[audit.Step]string{}
	for _, id := range []string{d.ID, r.ID} {
		es, err := log.Query(ctx, audit.Filter{Task: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			steps[e.Step] = e.Actor
		}
	}
	if want := "operator:" + opAddr; steps[audit.StepConfirmed] != want || steps[audit.StepDenied] != want {
		t.Errorf("audit actors: confirmed by %q, denied by %q; want operator:%s", steps[audit.StepConfirmed], steps[audit.StepDenied], opAddr)
	}
}
