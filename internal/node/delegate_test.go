package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

// delegateAgent is a small real SNAP agent on the node's relay: a SNAP
// server behind a Nostr inbox whose message/send answers each data part
// with answer's data part, on one task.
type delegateAgent struct {
	key    *identity.Key
	mu     sync.Mutex
	got    []map[string]any // the data parts received, in order
	taskID []string         // the taskId of each request ("" for none)
	// posts counts the requests that came over HTTP, when the delegate
	// is served there too.
	posts atomic.Int64
}

// newDelegateKey is the delegate's key, made before the node starts so
// that the node can be configured with its address.
func newDelegateKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startDelegate serves the delegate of key on urls until the test ends,
// with its card published there; answer gives the data part of the reply
// to each request's data part, or an error, answered as a SNAP error with
// its text.
func startDelegate(t *testing.T, key *identity.Key, urls []string, answer func(data map[string]any) any) *delegateAgent {
	t.Helper()
	return startDelegateVia(t, key, urls, false, answer)
}

// startDelegateVia is startDelegate with the delegate served over HTTP too,
// on 127.0.0.1, when withHTTP is set: its card then declares that
// endpoint before its relays.
func startDelegateVia(t *testing.T, key *identity.Key, urls []string, withHTTP bool, answer func(data map[string]any) any) *delegateAgent {
	t.Helper()
	d := &delegateAgent{key: key}
	self := key.Address(identity.Mainnet)
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p struct {
			Message snap.InnerMessage `json:"message"`
			TaskID  string            `json:"taskId"`
		}
		if err := json.Unmarshal(req.Payload, &p); err != nil || len(p.Message.Parts) != 1 || p.Message.Parts[0].Data == nil {
			t.Errorf("the delegate got %s; want one data part", req.Payload)
			return nil, snap.NewError(snap.CodeInvalidPayload, "want one data part", nil)
		}
		var data map[string]any
		json.Unmarshal(p.Message.Parts[0].Data, &data)
		d.mu.Lock()
		d.got = append(d.got, data)
		d.taskID = append(d.taskID, p.TaskID)
		d.mu.Unlock()
		id := p.TaskID
		if id == "" {
			id = "remote-" + uuid.NewString()
		}
		ans := answer(data)
		if err, ok := ans.(error); ok {
			return nil, snap.NewError(snap.CodeInvalidPayload, err.Error(), nil)
		}
		b, _ := json.Marshal(ans)
		return map[string]any{"task": &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateInputRequired, Timestamp: time.Now()},
			History: []tasks.Message{p.Message, {MessageID: uuid.NewString(), Role: snap.RoleAgent, Parts: []snap.Part{snap.DataPart(b)}}}}}, nil
	})
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: quiet})
	pool.Start(ctx)
	server := snap.NewServer(snap.ServerConfig{Key: key, Router: router, Logger: quiet, MaxResponseSize: relay.MaxNIP44Plain,
		Validator: snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: key, Transport: pool, Handler: server, Logger: quiet, Workers: 2})
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; pool.Close() })
	select {
	case <-inbox.Ready():
	case err := <-done:
		t.Fatalf("the delegate's inbox: %v", err)
	}
	card := &snap.Card{Name: "delegate", Description: "answers jobs", Version: "1.0.0", Identity: self, NostrRelays: urls,
		Skills: []snap.Skill{{ID: "jobs", Name: "Jobs", Description: "answers job requests", Tags: []string{"agent"}, Examples: []string{"a job request"}}}, DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"application/json"}}
	if withHTTP {
		hs, err := snaphttp.New(snaphttp.Config{Handler: server, Key: key, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				d.posts.Add(1)
			}
			hs.ServeHTTP(w, r)
		})
		srv := &http.Server{Handler: counted}
		served := make(chan struct{})
		go func() { srv.Serve(ln); close(served) }()
		t.Cleanup(func() { srv.Close(); <-served })
		card.Endpoints = []snap.Endpoint{{Protocol: "http", URL: "http://" + ln.Addr().String() + "/snap"}}
	}
	ev, err := snapnostr.CardEvent(card, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
	defer pcancel()
	if _, err := pool.Publish(pctx, ev); err != nil {
		t.Fatalf("publishing the delegate's card: %v", err)
	}
	return d
}

func (d *delegateAgent) requests() ([]map[string]any, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]map[string]any(nil), d.got...), append([]string(nil), d.taskID...)
}

// startDelegatingNode starts a node on SQLite whose agent delegates to key,
// its settings changed by mutate.
func startDelegatingNode(t *testing.T, key *identity.Key, mutate ...func(*config.Config)) *workerNode {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "data")
	var maxAnswer int
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Database = filepath.Join(dataDir, "tasks.db")
		c.Agent.Delegate = key.Address(identity.Mainnet)
		c.Agent.StepTimeout = config.Duration{Duration: 20 * time.Second}
		c.Agent.Lease = config.Duration{Duration: 2 * time.Second}
		maxAnswer = c.Agent.MaxAnswerBytes
		for _, m := range mutate {
			m(c)
		}
	})
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &workerNode{agentNode: &agentNode{Node: n, maxAnswer: maxAnswer, alice: newRequester(t, n.RelayURLs()), dataDir: dataDir}, stop: stop}
}

// A node with agent.delegate hands a peer's free-text task to another SNAP
// agent: the job request goes in a signed message/send, the observation
// continues the delegate's task, and the node carries out the delegate's
// WRITE_FILE on its own sandbox before the COMPLETED ends the task.
func TestDelegateCompletesJob(t *testing.T) {
	key := newDelegateKey(t)
	w := startDelegatingNode(t, key)
	d := startDelegate(t, key, w.RelayURLs(), func(data map[string]any) any {
		if desc, ok := data["task_description"].(string); ok {
			return map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "write the report",
				"action": "WRITE_FILE", "args": map[string]any{"path": "/sandbox/report.md", "content": "# Report\n\n" + desc + "\n"}}
		}
		return map[string]any{"action": "COMPLETED", "evidence_files": []string{"/sandbox/report.md"}, "summary_for_supervisor": "The report is written."}
	})
	id := w.send(t, "", "summarise the week in a report")
	got := w.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted || got.Status.Message != "The report is written." {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	b, err := os.ReadFile(w.sandboxFile("report.md"))
	if err != nil || string(b) != "# Report\n\nsummarise the week in a report\n" {
		t.Fatalf("report.md = %q, %v", b, err)
	}
	reqs, taskIDs := d.requests()
	if len(reqs) != 2 || reqs[0]["task_description"] != "summarise the week in a report" || reqs[0]["job_id"] != id ||
		reqs[1]["job_id"] != id || !strings.Contains(reqs[1]["observation"].(string), `"outcome":"completed"`) {
		t.Fatalf("the delegate got %v", reqs)
	}
	if taskIDs[0] != "" || !strings.HasPrefix(taskIDs[1], "remote-") {
		t.Errorf("taskIds %q: want a new task, then the same one continued", taskIDs)
	}
	h := w.history(t, id)
	if len(h.Interactions) != 2 || h.Interactions[0].Response.Action != "WRITE_FILE" || h.Interactions[1].Response.Action != "COMPLETED" ||
		h.Interactions[0].Request.Metadata.Model != "delegate:"+key.Address(identity.Mainnet) {
		t.Fatalf("history: %+v", h.Interactions)
	}
	w.checkHistories(t)
}

// A delegate that answers something other than a worker answer stops the
// job at once: the task waits for a human with the reason, and the
// violation is in the audit log.
func TestDelegateGarbage(t *testing.T) {
	key := newDelegateKey(t)
	w := startDelegatingNode(t, key)
	startDelegate(t, key, w.RelayURLs(), func(map[string]any) any { return map[string]any{"hello": "world"} })
	id := w.send(t, "", "write a report into report.md")
	got := w.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	const want = "the delegate answered garbage"
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "the worker failed") || strings.Contains(got.Status.Message, want) {
		t.Fatalf("task %s %q; want input_required, the worker failed, its reason kept for the operator", got.Status.State, got.Status.Message)
	}
	h := w.history(t, id)
	if n := len(h.Interactions); n != 1 || h.Interactions[0].Response.Kind != agent.KindAPIError ||
		!strings.Contains(h.Interactions[0].Response.Error, want) || !strings.Contains(h.Interactions[0].Response.Error, "(schema)") {
		t.Errorf("history: %+v; want one failed step with %q (schema)", h.Interactions, want)
	}
	w.checkHistories(t)
	var audited bool
	for _, e := range w.auditOf(t, id) {
		if e.Decision == "worker_stopped" && strings.Contains(e.Reason, want) && strings.Contains(string(e.Detail), `"delegate":"`+key.Address(identity.Mainnet)+`"`) {
			audited = true
		}
	}
	if !audited {
		t.Error("the violation is not in the audit log")
	}
}

// A delegate's error response names secrets: the audit entry of the
// violation (the audit log cannot be edited afterwards), the step's
// history and the job's reason hold them redacted, by the built-in
// patterns and the operator's agent.redact.
func TestDelegateErrorRedacted(t *testing.T) {
	key := newDelegateKey(t)
	w := startDelegatingNode(t, key, func(c *config.Config) { c.Agent.Redact = []string{`corp-token-\w+`} })
	startDelegate(t, key, w.RelayURLs(), func(map[string]any) any {
		return errors.New("calling the API with sk-live-ABCDEF0123456789abcdef failed; corp-token-SECRETVALUE42 refused")
	})
	id := w.send(t, "", "write a report into report.md")
	if got := w.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	h := w.history(t, id)
	if len(h.Interactions) != 1 {
		t.Fatalf("history: %+v; want one failed step", h.Interactions)
	}
	j, err := w.Agent().Store().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var audited string
	for _, e := range w.auditOf(t, id) {
		if e.Decision == "worker_stopped" {
			audited = e.Reason
		}
	}
	for where, s := range map[string]string{"audit": audited, "history": h.Interactions[0].Response.Error, "job's reason": j.Reason} {
		if !strings.Contains(s, "the delegate answered step 0 with an error") || !strings.Contains(s, "[REDACTED]") ||
			strings.Contains(s, "ABCDEF0123456789") || strings.Contains(s, "SECRETVALUE42") {
			t.Errorf("the %s: %q; want the error response, its secrets [REDACTED]", where, s)
		}
	}
}

// A delegate whose card declares an HTTP endpoint on loopback is asked
// over Nostr by default: a card found on the relays must not make the node
// post into its own network. With agent.delegate_private_endpoints, the
// same job goes over HTTP, the card's endpoint first, and nothing over
// Nostr.
func TestDelegateEndpointPrivateSetting(t *testing.T) {
	answer := func(data map[string]any) any {
		return map[string]any{"action": "COMPLETED", "evidence_files": []string{}, "summary_for_supervisor": "Nothing to do."}
	}
	for _, tc := range []struct {
		name    string
		private bool
	}{{"default", false}, {"private endpoints allowed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			key := newDelegateKey(t)
			w := startDelegatingNode(t, key, func(c *config.Config) { c.Agent.DelegatePrivateEndpoints = tc.private })
			d := startDelegateVia(t, key, w.RelayURLs(), true, answer)
			id := w.send(t, "", "nothing to do")
			got := w.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			reqs, _ := d.requests()
			posts := d.posts.Load()
			switch {
			case len(reqs) != 1:
				t.Errorf("the delegate got %d steps; want 1", len(reqs))
			case tc.private && posts != 1:
				t.Errorf("%d requests over HTTP; want the step's", posts)
			case !tc.private && posts != 0:
				t.Errorf("%d requests over HTTP; want none: the step over Nostr", posts)
			}
		})
	}
}
