package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/snap"
)

// startHTTPNode starts a real node with its embedded relay and HTTP on
// free loopback ports.
func startHTTPNode(t *testing.T) *node.Node {
	t.Helper()
	return startHTTPNodeIn(t, filepath.Join(t.TempDir(), "data"))
}

// startHTTPNodeIn is startHTTPNode with its data in dataDir.
func startHTTPNodeIn(t *testing.T, dataDir string) *node.Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	return n
}

// received checks one JSON line of the CLI: a message from the node to
// the test key, signed, of type typ; it returns the message.
func received(t *testing.T, n *node.Node, line string, typ snap.Type) *snap.Verified {
	t.Helper()
	k, _ := identity.FromHex(testSecret)
	v, err := snap.NewValidator(snap.Config{Self: k.Address(identity.Mainnet)}).Validate(context.Background(), []byte(line))
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if !v.Signed || v.From != n.Address() || v.To != testAddress || v.Type != typ {
		t.Fatalf("line %q: signed %v from %s to %s type %s", line, v.Signed, v.From, v.To, v.Type)
	}
	return v
}

func proposalFile(t *testing.T, dir, path string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "cli test",
		"action": "WRITE_FILE", "args": map[string]any{"path": path, "content": "from the cli\n"}})
	return writeFile(t, dir, uuid.NewString()+".json", string(b), 0o600)
}

// send, task get and discover over HTTP and WebSocket against a real node;
// a response that does not come from the agent addressed is refused (3).
func TestSendOverHTTP(t *testing.T) {
	noEnvKey(t)
	n := startHTTPNode(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	base := n.HTTPURL()
	ws := "ws" + strings.TrimPrefix(base, "http") + "/snap"

	r := runCLI(t, "", "send", "--to", n.Address(), "--http", base, "--key", key, "hello", "over", "http")
	if r.code != 0 {
		t.Fatalf("send --http: %s", r)
	}
	v := received(t, n, strings.TrimSpace(r.stdout), snap.TypeResponse)
	var p struct {
		Task struct {
			ID     string                          `json:"id"`
			Status struct{ State, Message string } `json:"status"`
		} `json:"task"`
	}
	// Free text, and the node has no agent: failed at once, saying how to
	// enable one.
	if err := json.Unmarshal(v.Payload, &p); err != nil || p.Task.Status.State != "failed" || !strings.Contains(p.Task.Status.Message, "--llm-url") {
		t.Fatalf("send --http payload %s; want a failed task naming --llm-url", v.Payload)
	}

	r = runCLI(t, "", "task", "get", "--to", n.Address(), "--http", ws, "--key", key, p.Task.ID)
	if r.code != 0 || !strings.Contains(r.stdout, p.Task.ID) || !strings.Contains(r.stdout, `"state":"failed"`) {
		t.Fatalf("task get over WebSocket: %s", r)
	}
	received(t, n, strings.TrimSpace(r.stdout), snap.TypeResponse)
	r = runCLI(t, "", "task", "get", "--to", n.Address(), "--http", base+"/snap", "--key", key, "no-such-task")
	if r.code != 1 || !strings.Contains(r.stdout, `"code":1001`) {
		t.Errorf("unknown task: %s", r)
	}

	// Addressed to another agent, the node answers from itself: not the
	// agent asked, so no valid response.
	other, _ := identity.FromHex(otherSecret)
	r = runCLI(t, "", "send", "--to", other.Address(identity.Mainnet), "--http", base, "--key", key, "hi")
	if r.code != exitTimeout || !strings.Contains(r.stderr, "not the agent addressed") {
		t.Errorf("answer from another agent: %s", r)
	}
	closed := "http://" + nettest.RefusedAddr(t).String()
	if r := runCLI(t, "", "send", "--to", n.Address(), "--http", closed, "--key", key, "--timeout", "5s", "hi"); r.code != exitTimeout {
		t.Errorf("nothing listening: %s", r)
	}

	usage := []struct {
		name string
		args []string
		want string
	}{
		{"--http and --relay", []string{"--http", base, "--relay", "ws://127.0.0.1:1", "hi"}, "--relay and --persist are for Nostr"},
		{"--http and --persist", []string{"--http", base, "--persist", "hi"}, "--relay and --persist are for Nostr"},
		{"not a web URL", []string{"--http", "ftp://x", "hi"}, "want an http://"},
		{"no host", []string{"--http", "http://", "hi"}, "no host"},
	}
	for _, u := range usage {
		t.Run(u.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"send", "--to", n.Address(), "--key", key}, u.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, u.want) {
				t.Errorf("%s", r)
			}
		})
	}
}

// stream prints each event as a JSON line (stdout is not a terminal), in
// version order, then the final response; over SSE, WebSocket and Nostr.
// --resubscribe follows a task that has ended: its current state, then
// the task.
func TestStreamCommand(t *testing.T) {
	noEnvKey(t)
	n := startHTTPNode(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	base := n.HTTPURL()
	transports := []struct{ name, flag, url string }{
		{"SSE", "--http", base},
		{"WebSocket", "--http", "ws" + strings.TrimPrefix(base, "http")},
		{"Nostr", "--relay", n.RelayURLs()[0]},
	}
	var taskID string
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			r := runCLI(t, "", "stream", "--to", n.Address(), tr.flag, tr.url, "--key", key,
				"--data", proposalFile(t, dir, "/sandbox/"+tr.name+".txt"))
			if r.code != 0 {
				t.Fatalf("%s", r)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			var states []string
			for _, l := range lines[:len(lines)-1] {
				v := received(t, n, l, snap.TypeEvent)
				states = append(states, eventSummary(v.Payload))
			}
			final := received(t, n, lines[len(lines)-1], snap.TypeResponse)
			if len(states) != 5 || !strings.Contains(states[0], "v1 · submitted") || !strings.Contains(states[4], "v5 · completed") {
				t.Errorf("events:\n%s", strings.Join(states, "\n"))
			}
			if !strings.Contains(string(final.Payload), `"completed"`) {
				t.Errorf("final %s", final.Payload)
			}
			var p struct {
				Task struct{ ID string } `json:"task"`
			}
			json.Unmarshal(final.Payload, &p)
			taskID = p.Task.ID
		})
	}

	r := runCLI(t, "", "stream", "--to", n.Address(), "--http", base, "--key", key, "--task", taskID, "--resubscribe")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) < 2 || !strings.Contains(eventSummary(received(t, n, lines[0], snap.TypeEvent).Payload), "completed (current)") {
		t.Fatalf("resubscribe to an ended task: %s", r)
	}
	received(t, n, lines[len(lines)-1], snap.TypeResponse)
	if r := runCLI(t, "", "stream", "--to", n.Address(), "--http", base, "--key", key, "--task", taskID, "--resubscribe", "--after", "0"); r.code != 0 {
		t.Fatalf("resubscribe --after 0: %s", r)
	}
	if r := runCLI(t, "", "task", "get", "--to", n.Address(), "--http", base, "--key", key, "--history", "0", taskID); r.code != 0 || strings.Contains(r.stdout, `"history"`) {
		t.Fatalf("task get --history 0: %s", r)
	}

	usage := []struct {
		name string
		args []string
		want string
	}{
		{"resubscribe without task", []string{"--resubscribe"}, "needs --task"},
		{"resubscribe with text", []string{"--resubscribe", "--task", "t", "hi"}, "sends no message"},
		{"after without resubscribe", []string{"--after", "3", "hi"}, "goes with --resubscribe"},
		{"negative after", []string{"--resubscribe", "--task", "t", "--after", "-1"}, "0 or more"},
		{"nothing to send", nil, "nothing to send"},
		{"no target", []string{"--to", "", "hi"}, "--to ADDRESS is required"},
	}
	for _, u := range usage {
		t.Run(u.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"stream", "--to", n.Address(), "--http", base, "--key", key}, u.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, u.want) {
				t.Errorf("%s", r)
			}
		})
	}
}

// On a terminal the events rewrite one line, stripped of control
// characters and cut to fit, below a line naming the task; done ends the
// line.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := &progressLine{w: &b}
	for _, payload := range []string{
		`{"taskId":"t-1","state":"working","version":2}`,
		`{"taskId":"t-1","progress":0.5,"message":"half\u001b[31m way\nthere"}`,
		`{"taskId":"t-1","message":"` + strings.Repeat("long ", 40) + `"}`,
	} {
		if err := p.event(&snap.Message{Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	p.done()
	frames := strings.Split(b.String(), "\r\x1b[K")
	if len(frames) != 5 || frames[0] != "" {
		t.Fatalf("output %q", b.String())
	}
	if frames[1] != "task t-1\n" {
		t.Errorf("task line %q", frames[1])
	}
	if frames[2] != "v2 · working" {
		t.Errorf("first line %q", frames[2])
	}
	if frames[3] != "50% · half[31m way there" {
		t.Errorf("second line %q", frames[3])
	}
	if got := []rune(strings.TrimSuffix(frames[4], "\n")); len(got) != progressWidth || got[len(got)-1] != '…' || !strings.HasSuffix(frames[4], "\n") {
		t.Errorf("third line %q", frames[4])
	}
	var quiet bytes.Buffer
	(&progressLine{w: &quiet}).done()
	if quiet.Len() != 0 {
		t.Errorf("done without events wrote %q", quiet.String())
	}
}

// An agent's step, as the node streams it with the task's full id, is
// read whole on the progress line: the id is not repeated in front of it,
// where it left "step 1: WRIT…" of a 78-column line.
func TestProgressLineShowsStep(t *testing.T) {
	var b bytes.Buffer
	p := &progressLine{w: &b}
	const id = "a2f9f73f-c4fb-4692-adca-eebb1652455b"
	step := "step 1: WRITE_FILE /sandbox/report.md → completed"
	for _, payload := range []string{
		`{"taskId":"` + id + `","state":"working","version":2,"progress":0.5,"message":"the agent is working on the task"}`,
		`{"taskId":"` + id + `","state":"working","version":3,"progress":0.5,"message":"` + step + `"}`,
	} {
		if err := p.event(&snap.Message{Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	p.done()
	out := b.String()
	if !strings.Contains(out, step) {
		t.Errorf("the step is not shown whole: %q", out)
	}
	if strings.Count(out, id) != 1 {
		t.Errorf("the task id is not shown once: %q", out)
	}
}

func TestEventSummary(t *testing.T) {
	cases := []struct{ payload, want string }{
		{`{"taskId":"t","state":"input_required","version":4}`, "task t · v4 · input_required"},
		{`{"taskId":"t","state":"completed","version":5,"current":true}`, "task t · v5 · completed (current)"},
		{`{"taskId":"t","artifact":{"artifactId":"diff-1","partial":true},"version":3}`, "task t · v3 · artifact diff-1 (partial)"},
		{`{"taskId":"t","progress":1,"message":"done"}`, "task t · 100% · done"},
		{`{}`, "event"},
		{`not json`, "event"},
	}
	for _, tc := range cases {
		if got := eventSummary([]byte(tc.payload)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.payload, got, tc.want)
		}
	}
}

// discover --http fetches and verifies the well-known card; a forged one
// is an error object with its code.
func TestDiscoverHTTP(t *testing.T) {
	n := startHTTPNode(t)
	r := runCLI(t, "", "discover", "--http", n.HTTPURL()+"/")
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	var out struct {
		Identity, PublicKey, Sig string
		Timestamp                int64
		Card                     json.RawMessage
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Identity != n.Address() {
		t.Fatalf("%s (%v)", r, err)
	}
	doc, _ := json.Marshal(map[string]any{"card": out.Card, "sig": out.Sig, "publicKey": out.PublicKey, "timestamp": out.Timestamp})
	if _, _, err := snap.VerifySignedCard(doc); err != nil {
		t.Errorf("the printed card does not verify: %v", err)
	}
	if r := runCLI(t, "", "discover", "--http", n.HTTPURL(), "--identity", testAddress); r.code != 1 || !strings.Contains(r.stderr, "not "+testAddress) {
		t.Errorf("--identity of another agent: %s", r)
	}
	if r := runCLI(t, "", "discover", "--http", n.HTTPURL(), "--skill", "x"); r.code != exitUsage {
		t.Errorf("--http with --skill: %s", r)
	}
	// The endpoint the node prints (http=…/snap) is not the base URL: the
	// 404 says which URL to give.
	if r := runCLI(t, "", "discover", "--http", n.HTTPURL()+"/snap"); r.code != 1 ||
		!strings.Contains(r.stderr, "--http "+n.HTTPURL()+" ") {
		t.Errorf("--http at the /snap endpoint: %s", r)
	}

	forged := strings.Replace(string(doc), `"description":"`, `"description":"forged `, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(forged)) }))
	defer ts.Close()
	r = runCLI(t, "", "discover", "--http", ts.URL)
	if r.code != 1 || snapError(t, r).Code != int(snap.CodeSignatureInvalid) {
		t.Errorf("forged card: %s", r)
	}
}

// send, task get and stream with --fallback find the agent's card on the
// relays and reach it at the HTTP endpoint the card declares first (a
// proxy here, which counts what it forwards), not over Nostr, once
// --private-endpoints lets them post to its loopback address; without it,
// the local node is asked over Nostr, the next transport of its card, and
// stderr says why the endpoint was skipped. --fallback with --http is a
// usage error.
func TestFallbackFollowsTheCard(t *testing.T) {
	noEnvKey(t)
	var (
		target atomic.Pointer[url.URL]
		posts  atomic.Int32
	)
	var first atomic.Pointer[[]byte] // the first request's body
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				t.Error(err)
			}
			first.CompareAndSwap(nil, &b)
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), "127.0.0.1:0", "127.0.0.1:0"
	cfg.HTTPPublicURL = proxy.URL
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	u, err := url.Parse(n.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	target.Store(u)
	key := keyFile(t, t.TempDir(), testSecret)
	relay := n.RelayURLs()[0]

	r := runCLI(t, "", "send", "--fallback", "--to", n.Address(), "--relay", relay, "--key", key, "hello", "over", "nostr")
	if r.code != 0 {
		t.Fatalf("send --fallback: %s", r)
	}
	received(t, n, strings.TrimSpace(r.stdout), snap.TypeResponse)
	if posts.Load() != 0 || !strings.Contains(r.stderr, "not connecting to "+proxy.URL) || !strings.Contains(r.stderr, "--private-endpoints") {
		t.Fatalf("send --fallback: the card's loopback endpoint got %d requests, want none, and stderr to name it and --private-endpoints: %s", posts.Load(), r)
	}

	r = runCLI(t, "", "send", "--fallback", "--private-endpoints", "--to", n.Address(), "--relay", relay, "--key", key, "hello", "by", "the", "card")
	if r.code != 0 {
		t.Fatalf("send --fallback --private-endpoints: %s", r)
	}
	v := received(t, n, strings.TrimSpace(r.stdout), snap.TypeResponse)
	if posts.Load() != 1 {
		t.Fatalf("the card's HTTP endpoint got %d requests, want 1 (the request went over Nostr)", posts.Load())
	}
	var p struct {
		Task struct{ ID string } `json:"task"`
	}
	if err := json.Unmarshal(v.Payload, &p); err != nil || p.Task.ID == "" {
		t.Fatalf("payload %s", v.Payload)
	}
	// Sent with an idempotency key: an attempt by another way after a
	// lost answer makes no second task.
	var sent struct {
		Payload struct {
			Key string `json:"idempotencyKey"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(*first.Load(), &sent); err != nil || sent.Payload.Key == "" {
		t.Errorf("send --fallback sent no idempotency key: %s", *first.Load())
	}
	r = runCLI(t, "", "task", "get", "--fallback", "--private-endpoints", "--to", n.Address(), "--relay", relay, "--key", key, p.Task.ID)
	if r.code != 0 || !strings.Contains(r.stdout, p.Task.ID) || posts.Load() != 2 {
		t.Fatalf("task get --fallback (%d requests through the card's endpoint): %s", posts.Load(), r)
	}
	r = runCLI(t, "", "send", "--fallback", "--http", n.HTTPURL(), "--to", n.Address(), "--key", key, "hi")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--fallback follows the endpoints of the card") {
		t.Errorf("--fallback with --http: %s", r)
	}
}

// A client command given no relay, when the default one does not answer,
// says what the default is and what to give; given a relay that does not
// answer, it says only that.
func TestUnreachableDefaultRelayHint(t *testing.T) {
	noEnvKey(t)
	if c, err := net.Dial("tcp", "127.0.0.1:7447"); err == nil {
		c.Close()
		t.Skip("something listens on 127.0.0.1:7447, the default relay: the hint is for when nothing does")
	}
	closed := "ws://" + nettest.RefusedAddr(t).String()
	key := keyFile(t, t.TempDir(), testSecret)
	other, _ := identity.FromHex(otherSecret)
	to := other.Address(identity.Mainnet)
	const hint = "no --relay was given, and ws://127.0.0.1:7447"
	for _, args := range [][]string{
		{"send", "--to", to, "--key", key, "--timeout", "5s", "hi"},
		{"discover", "--identity", to, "--timeout", "5s"},
	} {
		r := runCLI(t, "", args...)
		if r.code == exitOK || !strings.Contains(r.stderr, hint) || !strings.Contains(r.stderr, "--relay URL") {
			t.Errorf("%s without --relay: %s", args[0], r)
		}
		r = runCLI(t, "", append(args[:1:1], append([]string{"--relay", closed}, args[1:]...)...)...)
		if r.code == exitOK || strings.Contains(r.stderr, hint) || !strings.Contains(r.stderr, "could not reach any relay") {
			t.Errorf("%s --relay %s: %s", args[0], closed, r)
		}
	}
}

// On a terminal, send and stream follow the response's JSON line with a
// summary on stderr: the task's id (not the message's), its state and
// note, and the command that follows it, or reads it again once ended.
// stdout is the JSON line a pipe gets, and a pipe gets no summary.
func TestTaskSummaryOnTerminal(t *testing.T) {
	noEnvKey(t)
	data := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(filepath.Join(data, "sandbox"), 0o700)
	writeFile(t, filepath.Join(data, "sandbox"), "old.txt", "old\n", 0o600)
	n := startHTTPNodeIn(t, data)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	base := n.HTTPURL()
	taskOf := func(line string) (id, state string) {
		var p struct {
			Task struct {
				ID     string
				Status struct{ State string }
			}
		}
		json.Unmarshal(received(t, n, line, snap.TypeResponse).Payload, &p)
		return p.Task.ID, p.Task.Status.State
	}

	r := runTerminal(t, "", "send", "--to", n.Address(), "--http", base, "--key", key, "hello")
	id, state := taskOf(strings.TrimSpace(r.stdout))
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || state != "failed" {
		t.Fatalf("send on a terminal: %s", r)
	}
	if want := "task " + id + ": failed — "; !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "--llm-url") {
		t.Errorf("send on a terminal: stderr %q, want it to start with %q and give the note", r.stderr, want)
	}
	if want := "read it again: snapnode task get --to " + n.Address() + " --key " + key + " --http " + base + " " + id + "\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("send on a terminal: stderr %q, want %q", r.stderr, want)
	}
	if r := runCLI(t, "", "send", "--to", n.Address(), "--http", base, "--key", key, "hello"); r.code != 0 || r.stderr != "" {
		t.Errorf("send piped: %s", r)
	}

	// A task that waits on an operator is followed with stream --resubscribe.
	r = runTerminal(t, "", "stream", "--to", n.Address(), "--http", base, "--key", key,
		"--data", deleteProposal(t, dir))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	id, state = taskOf(lines[len(lines)-1])
	if r.code != 0 || state != "input_required" {
		t.Fatalf("stream on a terminal: %s", r)
	}
	if want := "follow it: snapnode stream --to " + n.Address() + " --key " + key + " --http " + base + " --task " + id + " --resubscribe\n"; !strings.Contains(r.stderr, "task "+id+": input_required — ") || !strings.Contains(r.stderr, want) {
		t.Errorf("stream on a terminal: stderr %q, want the state and %q", r.stderr, want)
	}
}

func deleteProposal(t *testing.T, dir string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "cli test",
		"action": "DELETE_FILE", "args": map[string]any{"path": "/sandbox/old.txt"}})
	return writeFile(t, dir, uuid.NewString()+".json", string(b), 0o600)
}

func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"ws://127.0.0.1:7447": "ws://127.0.0.1:7447",
		"/home/a b/alice.key": `'/home/a b/alice.key'`,
		"it's":                `'it'\''s'`,
		"":                    "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// stream --fallback sends its message with an idempotency key, as send
// --fallback does: an endpoint that took the request, the node making a
// task of it, and then failed (a gateway's 502 after the upstream
// answered) is tried again, and the retry must follow that task, not
// make a second one (whose proposals would run again).
func TestStreamFallbackRetryMakesNoSecondTask(t *testing.T) {
	noEnvKey(t)
	var (
		target   atomic.Pointer[url.URL]
		posts    atomic.Int32
		firstRun atomic.Pointer[string] // the task the first attempt made
	)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || posts.Add(1) != 1 {
			rp.ServeHTTP(w, r)
			return
		}
		// The first attempt reaches the node, which makes its task and
		// streams it to its end; the client gets a 502.
		up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target.Load().JoinPath("snap").String(), r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		up.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(up)
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(b)) {
			data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
			if !ok {
				continue
			}
			var m struct {
				Payload struct {
					Task struct{ ID string } `json:"task"`
				} `json:"payload"`
			}
			if json.Unmarshal([]byte(data), &m) == nil && m.Payload.Task.ID != "" {
				firstRun.Store(&m.Payload.Task.ID)
			}
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), "127.0.0.1:0", "127.0.0.1:0"
	cfg.HTTPPublicURL = proxy.URL
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	u, err := url.Parse(n.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	target.Store(u)
	key := keyFile(t, t.TempDir(), testSecret)

	r := runCLI(t, "", "stream", "--fallback", "--private-endpoints", "--to", n.Address(), "--relay", n.RelayURLs()[0], "--key", key, "hello", "by", "the", "card")
	if r.code != 0 && r.code != 1 {
		t.Fatalf("stream --fallback: %s", r)
	}
	if posts.Load() != 2 {
		t.Fatalf("the card's endpoint got %d requests, want 2 (the failed one and its retry): %s", posts.Load(), r)
	}
	first := firstRun.Load()
	if first == nil {
		t.Fatal("the first attempt made no task")
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	v := received(t, n, lines[len(lines)-1], snap.TypeResponse)
	var p struct {
		Task struct{ ID string } `json:"task"`
	}
	if err := json.Unmarshal(v.Payload, &p); err != nil {
		t.Fatalf("payload %s", v.Payload)
	}
	if p.Task.ID != *first {
		t.Errorf("the retry made task %s; the first attempt's was %s: one message, two tasks", p.Task.ID, *first)
	}
}

// stream --resubscribe on a task that waits for an operator's decision
// says so on stderr at once (piped or not): the stream waits until the
// decision or --timeout, and where an operator sees and decides it.
// Before, it sat silent until the decision or its 10 minutes.
func TestResubscribeSaysItWaitsForADecision(t *testing.T) {
	noEnvKey(t)
	data := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(filepath.Join(data, "sandbox"), 0o700)
	writeFile(t, filepath.Join(data, "sandbox"), "old.txt", "old\n", 0o600)
	n := startHTTPNodeIn(t, data)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	base := n.HTTPURL()
	r := runCLI(t, "", "send", "--to", n.Address(), "--http", base, "--key", key, "--data", deleteProposal(t, dir))
	var p struct {
		Task struct {
			ID     string
			Status struct{ State, Message string }
		}
	}
	json.Unmarshal(received(t, n, strings.TrimSpace(r.stdout), snap.TypeResponse).Payload, &p)
	action, _, ok := strings.Cut(strings.TrimPrefix(p.Task.Status.Message, "confirmation needed for action "), ":")
	if r.code != 0 || p.Task.Status.State != "input_required" || !ok {
		t.Fatalf("the held delete: %s", r)
	}
	// The time-out ends the wait: the test needs only the line said
	// before it.
	r = runCLI(t, "", "stream", "--to", n.Address(), "--http", base, "--key", key, "--task", p.Task.ID, "--resubscribe", "--timeout", "1s")
	id := p.Task.ID
	for _, want := range []string{
		"task " + id + " waits for an operator's decision on action " + action,
		"until --timeout 1s",
		"snapnode held " + id,
		"snapnode approve --action " + action + " " + id,
		"snapnode deny --action " + action + " " + id,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if strings.Count(r.stderr, "waits for an operator's decision") != 1 {
		t.Errorf("the wait said %d times: %q", strings.Count(r.stderr, "waits for an operator's decision"), r.stderr)
	}
}
