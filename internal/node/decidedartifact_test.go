package node_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
)

// A held action's diff is shown on its task as the artifact "changes
// awaiting confirmation of action …"; once an operator decides, the same
// artifact (its id unchanged, so it is not shown twice) says what became
// of those changes: applied, with the diff, or denied. Before, a
// requester reading the task after the decision still found its changes
// "awaiting confirmation", and a denied task an artifact "changes made by
// DELETE_FILE" with the diff of changes never made.
func TestDecisionSettlesTheHeldChanges(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := map[bool]string{true: "approve", false: "deny"}[approve]
		t.Run(name, func(t *testing.T) {
			check := func(t *testing.T, dsn string) {
				r := newHeldRig(t, dsn)
				pending := heldChanges(t, r.get(t))
				if pending == nil || !strings.HasPrefix(pending.Name, "changes awaiting confirmation of action ") || len(pending.Parts) != 1 {
					t.Fatalf("held task's pending changes: %+v", pending)
				}
				p := postSNAP(t, r.n, r.send(t, r.op, decisionMsg(r.held.ID, map[string]any{"decision": name})))
				if code := errorCode(p); code != 0 {
					t.Fatalf("decision: %v", p)
				}
				got := r.get(t)
				want := map[bool]string{true: "completed", false: "failed"}[approve]
				if got.Status.State != want {
					t.Fatalf("decided task %s %q; want %s", got.Status.State, got.Status.Message, want)
				}
				var same int
				for _, a := range got.Artifacts {
					if a.ArtifactID == pending.ArtifactID {
						same++
					}
					if strings.Contains(a.Name, "awaiting confirmation") {
						t.Errorf("after the decision the task still has %q", a.Name)
					}
					if !approve && strings.HasPrefix(a.Name, "changes made by") {
						t.Errorf("a denied task has %q", a.Name)
					}
				}
				if same != 1 {
					t.Fatalf("%d artifacts %s after the decision; want 1: %+v", same, pending.ArtifactID, got.Artifacts)
				}
				settled := heldChanges(t, got)
				wantName := map[bool]string{true: ", applied", false: ", denied"}[approve]
				if !strings.HasSuffix(settled.Name, wantName) {
					t.Errorf("settled changes named %q; want it to end %q", settled.Name, wantName)
				}
				var diff bool
				for _, part := range settled.Parts {
					if part.Text != nil && *part.Text == *pending.Parts[0].Text {
						diff = true
					}
				}
				if diff != approve {
					t.Errorf("settled changes keep the diff: %v; want %v (%+v)", diff, approve, settled.Parts)
				}
			}
			testdb.Each(t, check)
		})
	}
}

// namedArtifact is an artifact as tasks/get shows it, with its name.
type namedArtifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name"`
	Parts      []struct {
		Text      *string `json:"text"`
		MediaType string  `json:"mediaType"`
	} `json:"parts"`
}

type namedTask struct {
	ID     string `json:"id"`
	Status struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"status"`
	Artifacts []namedArtifact `json:"artifacts"`
}

// heldChanges returns the task's artifact of a held action's changes
// (its id starts with "pending-"), nil when it has none.
func heldChanges(t *testing.T, v namedTask) *namedArtifact {
	t.Helper()
	var found *namedArtifact
	for i, a := range v.Artifacts {
		if strings.HasPrefix(a.ArtifactID, "pending-") {
			if found != nil {
				t.Fatalf("two artifacts of held changes: %+v", v.Artifacts)
			}
			found = &v.Artifacts[i]
		}
	}
	return found
}

// get reads the rig's held task with tasks/get, as its proposer.
func (r *heldRig) get(t *testing.T) namedTask {
	t.Helper()
	b, err := json.Marshal(map[string]any{"taskId": r.held.ID})
	if err != nil {
		t.Fatal(err)
	}
	raw := signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: r.proposer.Address(identity.Mainnet), To: r.n.Address(),
		Type: snap.TypeRequest, Method: "tasks/get", Payload: b, Timestamp: time.Now().Unix()}, r.proposer)
	p := postSNAP(t, r.n, raw)
	tb, _ := json.Marshal(p["task"])
	var v namedTask
	if err := json.Unmarshal(tb, &v); err != nil || v.ID == "" {
		t.Fatalf("no task in %v", p)
	}
	return v
}
