package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// streamEvent is a stream event's payload as a requester reads it.
type streamEvent struct {
	TaskID   string `json:"taskId"`
	State    string `json:"state"`
	Version  int64  `json:"version"`
	Current  bool   `json:"current"`
	Artifact *struct {
		ArtifactID string `json:"artifactId"`
	} `json:"artifact"`
}

func (e streamEvent) String() string {
	switch {
	case e.Current:
		return "current:" + e.State
	case e.Artifact != nil:
		return fmt.Sprintf("%d:%s", e.Version, strings.SplitN(e.Artifact.ArtifactID, "-", 2)[0])
	}
	return fmt.Sprintf("%d:%s", e.Version, e.State)
}

// streamed is one streaming exchange as the requester saw it.
type streamed struct {
	events []streamEvent
	final  map[string]any
	req    string // the request's Nostr event id
}

func (s streamed) summary() string {
	var out []string
	for _, e := range s.events {
		out = append(out, e.String())
	}
	return strings.Join(out, " ")
}

// versions returns the task versions of the events, failing unless they
// strictly increase.
func (s streamed) versions(t *testing.T) []int64 {
	t.Helper()
	var out []int64
	for _, e := range s.events {
		if e.Current {
			continue
		}
		if len(out) > 0 && e.Version <= out[len(out)-1] {
			t.Fatalf("version %d after %d: %s", e.Version, out[len(out)-1], s.summary())
		}
		out = append(out, e.Version)
	}
	return out
}

// stream sends a streaming request and collects its events; onEvent, when
// set, sees each as it arrives.
func (r *requester) stream(t *testing.T, n *node.Node, method string, payload any, persist bool, onEvent func(streamEvent)) streamed {
	t.Helper()
	body, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s streamed
	final, err := r.client.RequestStream(ctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
		client.NostrRequest{Method: method, Payload: body, Persist: persist},
		func(ev *client.NostrResponse) error {
			if ev.Type != snap.TypeEvent || ev.Method != method || ev.From != n.Address() || !ev.Signed {
				return fmt.Errorf("event envelope %+v", ev.Message)
			}
			var e streamEvent
			if err := json.Unmarshal(ev.Payload, &e); err != nil {
				return err
			}
			s.events = append(s.events, e)
			if onEvent != nil {
				onEvent(e)
			}
			return nil
		})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if err := json.Unmarshal(final.Payload, &s.final); err != nil {
		t.Fatal(err)
	}
	s.req = final.Event.Tags.GetFirst([]string{"e", ""}).Value()
	return s
}

// A proposal over message/stream, end to end on the embedded relay: the
// task's status and artifact events in version order, then exactly one
// final response with the whole task. A requester that only waits for the
// first response (as SDK peers do) gets the final task too. A held action:
// the stream ends at input_required; tasks/resubscribe after the last
// version seen follows the operator's approval live, with no gap or
// duplicate.
func TestStreamOverNostr(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, _ := startNode(t, func(c *config.Config) { c.DataDir = dataDir })
	alice := newRequester(t, n.RelayURLs())
	ctx := context.Background()

	// Stored kind, so that the relay keeps every answer to count them.
	w := alice.stream(t, n, "message/stream", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/s.txt", "content": "streamed\n"}), true, nil)
	if got := w.summary(); got != "1:submitted 2:working 3:result 4:diff 5:completed" {
		t.Fatalf("message/stream events: %s", got)
	}
	w.versions(t)
	task := taskOf(t, w.final)
	if task.Status.State != "completed" || len(task.Artifacts) != 2 || task.ID != w.events[0].TaskID {
		t.Fatalf("final task %+v", task)
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	answers, err := alice.pool.Query(qctx, nostr.Filter{Kinds: []int{relay.KindMessage},
		Tags: nostr.TagMap{"e": {w.req}, "p": {alice.key.NostrPublicKey()}}})
	if err != nil || len(answers) != len(w.events)+1 {
		t.Fatalf("the relay holds %d answers to the request, want %d events + 1 response (%v)", len(answers), len(w.events), err)
	}

	// The first response is the final one.
	p := alice.call(t, n, "message/stream", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/t.txt", "content": "x\n"}), false)
	if got := taskOf(t, p); got.Status.State != "completed" || len(got.Artifacts) != 2 {
		t.Fatalf("response-only requester: %v", p)
	}

	// A held delete: the stream ends at input_required.
	d := alice.stream(t, n, "message/stream", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/s.txt"}), false, nil)
	if got := d.summary(); got != "1:submitted 2:working 3:pending 4:input_required" {
		t.Fatalf("held delete: %s", got)
	}
	id := d.events[0].TaskID
	if got := taskOf(t, d.final); got.Status.State != "input_required" {
		t.Fatalf("held delete final: %v", d.final)
	}

	// Resubscribe after the last version seen; the operator approves once
	// the stream is open.
	last := d.versions(t)[len(d.versions(t))-1]
	approved := make(chan error, 1)
	r := alice.stream(t, n, "tasks/resubscribe", map[string]any{"taskId": id, "afterVersion": last}, false, func(e streamEvent) {
		if e.Current {
			go func() {
				_, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "approve", Task: id})
				approved <- err
			}()
		}
	})
	if err := <-approved; err != nil {
		t.Fatalf("approve: %v", err)
	}
	if len(r.events) == 0 || r.events[0].String() != "current:input_required" {
		t.Fatalf("resubscribe began with %s", r.summary())
	}
	if got := taskOf(t, r.final); got.Status.State != "completed" {
		t.Fatalf("resubscribe final: %v", r.final)
	}
	seen := append(d.versions(t), r.versions(t)...)
	stored, err := n.Tasks.TaskEvents(ctx, alice.key.Address(identity.Mainnet), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, e := range stored {
		want = append(want, e.Version)
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("versions over both streams %v, want the stored %v (%s | %s)", seen, want, d.summary(), r.summary())
	}

	// Someone else's task is not found, as for tasks/get.
	mallory := newRequester(t, n.RelayURLs())
	m := mallory.stream(t, n, "tasks/resubscribe", map[string]any{"taskId": id}, false, nil)
	if errCode(m.final) != 1001 || len(m.events) != 0 {
		t.Fatalf("another identity's resubscribe: %v after %d events", m.final, len(m.events))
	}
}
