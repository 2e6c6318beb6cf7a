package interop

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/jsinterop"
	"github.com/snapnode/snapnode/internal/node"
)

// httpNode is a real node serving SNAP over HTTP, SSE and WebSocket on a
// free loopback port.
type httpNode struct {
	*node.Node
	endpoint string // http://127.0.0.1:PORT/snap
	ws       string // ws://127.0.0.1:PORT/snap
	sandbox  string // the folder proposals write to (their /sandbox/)
}

func startHTTPSnapnode(t *testing.T) *httpNode {
	t.Helper()
	n, cfg := startSnapnodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	base := n.HTTPURL()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("HTTPURL %q, want http://127.0.0.1:PORT", base)
	}
	return &httpNode{Node: n, endpoint: base + "/snap", ws: "ws" + strings.TrimPrefix(base, "http") + "/snap", sandbox: cfg.SandboxPath()}
}

// url returns the address the JS client is given for transport.
func (n *httpNode) url(transport string) string {
	if transport == "ws" {
		return n.ws
	}
	return n.endpoint
}

// wireMessage is the part of a SNAP message (response or event) these
// tests read.
type wireMessage struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Type    string `json:"type"`
	Method  string `json:"method"`
	Payload struct {
		// response
		Task  *wireTask `json:"task"`
		Error *struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
		// event
		TaskID   string `json:"taskId"`
		State    string `json:"state"`
		Version  *int64 `json:"version"`
		Current  bool   `json:"current"`
		Artifact *struct {
			ArtifactID string `json:"artifactId"`
		} `json:"artifact"`
	} `json:"payload"`
}

type wireTask struct {
	ID     string `json:"id"`
	Status struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
	} `json:"artifacts"`
}

// noAgent tells whether the task is as a node without an agent answers
// free text: failed at once, the status message naming --llm-url.
func (t *wireTask) noAgent() bool {
	return t.Status.State == "failed" && strings.Contains(t.Status.Message, "--llm-url")
}

// label names an event the way the node tests do: "current:STATE",
// "VERSION:STATE" or "VERSION:ARTIFACT-KIND".
func (m wireMessage) label() string {
	p := m.Payload
	v := int64(-1)
	if p.Version != nil {
		v = *p.Version
	}
	switch {
	case p.Current:
		return "current:" + p.State
	case p.Artifact != nil:
		return fmt.Sprintf("%d:%s", v, strings.SplitN(p.Artifact.ArtifactID, "-", 2)[0])
	}
	return fmt.Sprintf("%d:%s", v, p.State)
}

// httpLine is a line http-request prints per message received.
type httpLine struct {
	Transport string            `json:"transport"`
	Message   json.RawMessage   `json:"message"`
	Verified  bool              `json:"verified"`
	Failures  []string          `json:"failures"`
	Reasons   map[string]string `json:"reasons"`
}

// httpExchange is one `client.mjs http-request` run as the client printed
// it: a line per message received, then a summary.
type httpExchange struct {
	code  int
	out   []byte
	lines []httpLine
	msgs  []wireMessage
	sum   struct {
		Transport   string   `json:"transport"`
		Status      int      `json:"status"`
		ContentType string   `json:"contentType"`
		SnapVersion *string  `json:"snapVersion"`
		Frames      int      `json:"frames"`
		Framing     []string `json:"framing"`
		Order       []string `json:"order"`
		OK          bool     `json:"ok"`
	}
	haveSum bool
}

// events returns the messages before the last, the final response.
func (x *httpExchange) events() []wireMessage {
	if len(x.msgs) == 0 {
		return nil
	}
	return x.msgs[:len(x.msgs)-1]
}

func (x *httpExchange) final() wireMessage {
	return x.msgs[len(x.msgs)-1]
}

func (x *httpExchange) summary() string {
	var out []string
	for _, e := range x.events() {
		out = append(out, e.label())
	}
	return strings.Join(out, " ")
}

// jsHTTP runs `client.mjs http-request` with the key secret, to the
// address to, over transport; a nil payload lets the client send its
// default one.
func jsHTTP(t *testing.T, n *httpNode, secret, to, transport, method string, payload any) *httpExchange {
	t.Helper()
	// The time-out is generous: under the whole suite with -race, a stream
	// to a loaded node has taken more than 10 s; nothing here measures time.
	args := []string{"http-request", "--url", n.url(transport), "--to-address", to, "--secret", secret,
		"--transport", transport, "--method", method, "--timeout-ms", "30000"}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--payload", string(b))
	}
	x := &httpExchange{}
	x.out, x.code = jsinterop.Run(t, testCtx(t, 30*time.Second), args...)
	for _, line := range bytes.Split(bytes.TrimSpace(x.out), []byte("\n")) {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("http-request printed a line that is not a JSON object: %s", line)
		}
		switch {
		case probe["message"] != nil:
			x.lines = append(x.lines, httpLine{})
			l := &x.lines[len(x.lines)-1]
			if err := json.Unmarshal(line, l); err != nil {
				t.Fatalf("message line: %v: %s", err, line)
			}
			var m wireMessage
			if err := json.Unmarshal(l.Message, &m); err != nil {
				t.Fatalf("message: %v: %s", err, l.Message)
			}
			x.msgs = append(x.msgs, m)
		case probe["frames"] != nil:
			if err := json.Unmarshal(line, &x.sum); err != nil {
				t.Fatalf("summary line: %v: %s", err, line)
			}
			x.haveSum = true
		}
	}
	if !x.haveSum || len(x.msgs) == 0 {
		t.Fatalf("http-request %s over %s: exit %d, no summary or no message:\n%s", method, transport, x.code, clip(x.out))
	}
	if x.sum.Transport != transport || x.sum.Frames != len(x.msgs) {
		t.Fatalf("summary %+v for %d messages over %s", x.sum, len(x.msgs), transport)
	}
	return x
}

// checkTransport asserts what every answer over transport must show: HTTP
// 200 with the right content type and a SNAP-Version header (HTTP, SSE),
// an upgraded connection (WebSocket), and framing the client found exact.
func checkTransport(t *testing.T, x *httpExchange, transport string) {
	t.Helper()
	want := map[string]struct {
		status int
		ctype  string
	}{"http": {200, "application/json"}, "sse": {200, "text/event-stream"}, "ws": {101, "websocket"}}[transport]
	if x.sum.Status != want.status || !strings.HasPrefix(x.sum.ContentType, want.ctype) {
		t.Errorf("%s: status %d, content type %q; want %d, %q", transport, x.sum.Status, x.sum.ContentType, want.status, want.ctype)
	}
	if transport != "ws" && (x.sum.SnapVersion == nil || *x.sum.SnapVersion != "0.1") {
		t.Errorf("%s: SNAP-Version header %v, want 0.1", transport, x.sum.SnapVersion)
	}
	if len(x.sum.Framing) != 0 || len(x.sum.Order) != 0 {
		t.Errorf("%s: framing problems %v, order problems %v", transport, x.sum.Framing, x.sum.Order)
	}
}

// checkVerified asserts that every message the client received verified
// (signature, from = the node, to = us, method echoed, fresh timestamp)
// and that the client exited 0.
func checkVerified(t *testing.T, x *httpExchange, n *httpNode, me string, method string) {
	t.Helper()
	if x.code != jsinterop.ExitOK || !x.sum.OK {
		t.Errorf("exit %d, ok %v; want 0, true:\n%s", x.code, x.sum.OK, clip(x.out))
	}
	for i, l := range x.lines {
		m := x.msgs[i]
		if !l.Verified || len(l.Failures) != 0 {
			t.Errorf("message %d not verified: %v %v", i, l.Failures, l.Reasons)
		}
		if m.From != n.Address() || m.To != me || m.Method != method {
			t.Errorf("message %d: from %s to %s method %s; want %s, %s, %s", i, m.From, m.To, m.Method, n.Address(), me, method)
		}
	}
}

// writeProposal is a message/stream payload whose task writes content to
// /sandbox/name: status events, a result and a diff artifact, completed.
func writeProposal(name, content string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user", "parts": []any{
		map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "interop: write " + name,
			"action": "WRITE_FILE", "args": map[string]any{"path": "/sandbox/" + name, "content": content}}}}}}
}

// deleteProposal is a message/send payload whose task deletes
// /sandbox/name: with the default policy, held for an operator's
// confirmation (input_required) when the file exists.
func deleteProposal(name string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user", "parts": []any{
		map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "interop: delete " + name,
			"action": "DELETE_FILE", "args": map[string]any{"path": "/sandbox/" + name}}}}}}
}

// The independent JavaScript client (Node's fetch and the ws package, no
// code shared with Go) drives a real node's /snap over HTTP, SSE and
// WebSocket as the SDK's HttpTransport and WebSocketTransport do, and
// verifies every message it gets: message/send and tasks/get cross
// transports; message/stream gives signed events in version order then
// exactly one final response; tasks/resubscribe resumes after the version
// given; a requester on plain HTTP gets only the final response.
func TestJSHTTPClientDrivesNode(t *testing.T) {
	jsinterop.Node(t)
	n := startHTTPSnapnode(t)
	me := mustKey(t, jsSecret).Address(identity.Mainnet)

	// message/send over HTTP and WebSocket: one verified response with a
	// new task, free text that fails at once (the node has no agent) with
	// a status message saying how to enable one.
	created := map[string]string{} // transport → task id
	for _, tr := range []string{"http", "ws"} {
		t.Run("message/send over "+tr, func(t *testing.T) {
			x := jsHTTP(t, n, jsSecret, n.Address(), tr, "message/send", text("over "+tr+" from JavaScript"))
			checkTransport(t, x, tr)
			checkVerified(t, x, n, me, "message/send")
			if len(x.msgs) != 1 {
				t.Fatalf("%d messages, want exactly 1", len(x.msgs))
			}
			r := x.msgs[0]
			if r.Type != "response" || r.Payload.Task == nil || r.Payload.Task.ID == "" || !r.Payload.Task.noAgent() {
				t.Fatalf("response %s, want a failed task naming --llm-url", x.lines[0].Message)
			}
			created[tr] = r.Payload.Task.ID
		})
	}
	if len(created) != 2 || created["http"] == created["ws"] {
		t.Fatalf("tasks created %v, want two distinct", created)
	}

	// tasks/get of each task over both transports: the same task.
	for made, id := range created {
		for _, tr := range []string{"http", "ws"} {
			t.Run("tasks/get over "+tr+" of a task made over "+made, func(t *testing.T) {
				x := jsHTTP(t, n, jsSecret, n.Address(), tr, "tasks/get", map[string]any{"taskId": id})
				checkTransport(t, x, tr)
				checkVerified(t, x, n, me, "tasks/get")
				if len(x.msgs) != 1 || x.msgs[0].Payload.Task == nil || x.msgs[0].Payload.Task.ID != id || !x.msgs[0].Payload.Task.noAgent() {
					t.Fatalf("tasks/get %s: %s", id, clip(x.out))
				}
			})
		}
	}

	// message/stream over SSE and WebSocket: the task's events in version
	// order, then exactly one response with the completed task; the file
	// is written.
	streamed := map[string]string{} // transport → task id
	for _, tr := range []string{"sse", "ws"} {
		t.Run("message/stream over "+tr, func(t *testing.T) {
			file, content := "js-"+tr+".txt", "streamed to the JS client over "+tr+"\n"
			x := jsHTTP(t, n, jsSecret, n.Address(), tr, "message/stream", writeProposal(file, content))
			checkTransport(t, x, tr)
			checkVerified(t, x, n, me, "message/stream")
			if got, want := x.summary(), "1:submitted 2:working 3:result 4:diff 5:completed"; got != want {
				t.Errorf("events %q, want %q", got, want)
			}
			last := int64(0)
			for i, e := range x.events() {
				if e.Type != "event" || e.Payload.Version == nil || *e.Payload.Version <= last {
					t.Errorf("message %d: type %s version %v after %d; want an event with a greater version", i, e.Type, e.Payload.Version, last)
					continue
				}
				last = *e.Payload.Version
			}
			f := x.final()
			if f.Type != "response" || f.Payload.Task == nil {
				t.Fatalf("last message %+v, want the response with the task", f)
			}
			task := f.Payload.Task
			if task.Status.State != "completed" || len(task.Artifacts) != 2 {
				t.Errorf("final task %+v, want completed with 2 artifacts", task)
			}
			for i, e := range x.events() {
				if e.Payload.TaskID != task.ID {
					t.Errorf("event %d of task %q, want %q", i, e.Payload.TaskID, task.ID)
				}
			}
			got, err := os.ReadFile(filepath.Join(n.sandbox, file))
			if err != nil || string(got) != content {
				t.Errorf("sandbox file %s: %q, %v; want %q", file, got, err, content)
			}
			streamed[tr] = task.ID
		})
	}

	// tasks/resubscribe after version 2 over SSE and WebSocket: the
	// current task first, then exactly the later events, then the task.
	for made, id := range streamed {
		for _, tr := range []string{"sse", "ws"} {
			t.Run("tasks/resubscribe over "+tr+" of a task streamed over "+made, func(t *testing.T) {
				x := jsHTTP(t, n, jsSecret, n.Address(), tr, "tasks/resubscribe", map[string]any{"taskId": id, "afterVersion": 2})
				checkTransport(t, x, tr)
				checkVerified(t, x, n, me, "tasks/resubscribe")
				if got, want := x.summary(), "current:completed 3:result 4:diff 5:completed"; got != want {
					t.Errorf("events %q, want %q", got, want)
				}
				if f := x.final(); f.Type != "response" || f.Payload.Task == nil || f.Payload.Task.ID != id || f.Payload.Task.Status.State != "completed" {
					t.Errorf("final %+v, want the completed task %s", f, id)
				}
			})
		}
	}

	// A requester that reads plain HTTP (as the SDK's send does) gets the
	// final response alone.
	t.Run("message/stream over plain http", func(t *testing.T) {
		x := jsHTTP(t, n, jsSecret, n.Address(), "http", "message/stream", writeProposal("js-plain.txt", "final only\n"))
		checkTransport(t, x, "http")
		checkVerified(t, x, n, me, "message/stream")
		if len(x.msgs) != 1 || x.msgs[0].Type != "response" || x.msgs[0].Payload.Task == nil ||
			x.msgs[0].Payload.Task.Status.State != "completed" || len(x.msgs[0].Payload.Task.Artifacts) != 2 {
			t.Errorf("plain HTTP stream: %s", clip(x.out))
		}
	})
}

// Every error class the client can provoke is answered, over plain HTTP
// with status 200, over WebSocket with exactly one frame, over SSE with a
// single response: a signed SNAP response from the node carrying the
// code and the data naming the field.
func TestJSHTTPClientErrors(t *testing.T) {
	jsinterop.Node(t)
	n := startHTTPSnapnode(t)
	me := mustKey(t, jsSecret).Address(identity.Mainnet)
	stranger := newKey(t).Address(identity.Mainnet)

	// A task of another identity, for the not-found case.
	other := newKey(t)
	x := jsHTTP(t, n, other.Hex(), n.Address(), "http", "message/send", text("someone else's"))
	if x.code != jsinterop.ExitOK || x.msgs[0].Payload.Task == nil {
		t.Fatalf("message/send by another identity: %s", clip(x.out))
	}
	othersTask := x.msgs[0].Payload.Task.ID

	cases := []struct {
		name     string
		to       string // "" = the node
		method   string
		payload  any
		code     int
		data     map[string]any // entries data must hold
		failures []string       // the client's failed checks (only "from" for a wrong recipient)
	}{
		{name: "unknown method", method: "foo/bar", payload: map[string]any{}, code: 1007, data: map[string]any{"method": "foo/bar"}},
		{name: "tasks/get without taskId", method: "tasks/get", payload: map[string]any{}, code: 1004,
			data: map[string]any{"field": "payload.taskId", "constraint": "required"}},
		{name: "message/send without messageId", method: "message/send", payload: map[string]any{"message": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "x"}}}},
			code: 1004, data: map[string]any{"field": "payload.message.messageId", "constraint": "required"}},
		{name: "wrong recipient", to: stranger, method: "message/send", payload: text("not for you"), code: 1004,
			data: map[string]any{"field": "to", "constraint": "recipient", "received": stranger}, failures: []string{"from"}},
		{name: "another identity's task", method: "tasks/get", payload: map[string]any{"taskId": othersTask}, code: 1001,
			data: map[string]any{"taskId": othersTask}},
	}
	for _, c := range cases {
		for _, tr := range []string{"http", "ws"} {
			t.Run(c.name+" over "+tr, func(t *testing.T) {
				to := c.to
				if to == "" {
					to = n.Address()
				}
				x := jsHTTP(t, n, jsSecret, to, tr, c.method, c.payload)
				checkErrorAnswer(t, x, n, me, tr, c.method, c.code, c.data, c.failures)
			})
		}
	}

	// A stream method with a bad payload over SSE: one response, no event.
	t.Run("message/stream without message over sse", func(t *testing.T) {
		x := jsHTTP(t, n, jsSecret, n.Address(), "sse", "message/stream", map[string]any{})
		checkErrorAnswer(t, x, n, me, "sse", "message/stream", 1004, map[string]any{"field": "payload.message"}, nil)
	})
}

// checkErrorAnswer asserts x is one signed response from the node with
// error code and data, and that the client failed exactly the checks
// failures.
func checkErrorAnswer(t *testing.T, x *httpExchange, n *httpNode, me, tr, method string, code int, data map[string]any, failures []string) {
	t.Helper()
	checkTransport(t, x, tr)
	if len(x.msgs) != 1 {
		t.Fatalf("%d messages, want exactly one response:\n%s", len(x.msgs), clip(x.out))
	}
	r, l := x.msgs[0], x.lines[0]
	if r.Type != "response" || r.From != n.Address() || r.To != me || r.Method != method {
		t.Errorf("answer %s: want a response from the node to %s for %s", l.Message, me, method)
	}
	if r.Payload.Error == nil || r.Payload.Error.Code != code {
		t.Fatalf("answer %s, want error %d", l.Message, code)
	}
	for k, v := range data {
		if r.Payload.Error.Data[k] != v {
			t.Errorf("error data %v: %s = %v, want %v", r.Payload.Error.Data, k, r.Payload.Error.Data[k], v)
		}
	}
	if !slices.Equal(l.Failures, failures) {
		t.Errorf("failed checks %v (%v), want %v", l.Failures, l.Reasons, failures)
	}
	wantExit := jsinterop.ExitOK
	if len(failures) != 0 {
		wantExit = jsinterop.ExitFail
	}
	if x.code != wantExit || x.sum.OK != (wantExit == jsinterop.ExitOK) {
		t.Errorf("exit %d, ok %v; want exit %d", x.code, x.sum.OK, wantExit)
	}
}

// discovered is what `client.mjs http-discover` prints.
type discovered struct {
	URL    string `json:"url"`
	Signed struct {
		Card struct {
			Identity string `json:"identity"`
			Name     string `json:"name"`
		} `json:"card"`
		Sig       string `json:"sig"`
		PublicKey string `json:"publicKey"`
		Timestamp int64  `json:"timestamp"`
	} `json:"signed"`
	Checks   map[string]bool `json:"checks"`
	Failures []string        `json:"failures"`
	Verified bool            `json:"verified"`
}

func jsDiscover(t *testing.T, base string, wantExit int) discovered {
	t.Helper()
	var d discovered
	runJS(t, wantExit, &d, "http-discover", "--url", base, "--timeout-ms", "10000")
	return d
}

// The JS client fetches the node's well-known card and verifies it as the
// SNAP specification's HTTP discovery says (JCS(card)|timestamp, SHA-256,
// BIP-340 against publicKey, publicKey = Q of card.identity); its identity
// is the node's. The same card with one field changed, served elsewhere,
// fails.
func TestJSHTTPDiscover(t *testing.T) {
	jsinterop.Node(t)
	n := startHTTPSnapnode(t)
	addr, err := identity.ParseAddress(n.Address())
	if err != nil {
		t.Fatal(err)
	}

	d := jsDiscover(t, n.HTTPURL(), jsinterop.ExitOK)
	if !d.Verified || len(d.Failures) != 0 {
		t.Fatalf("card not verified: %v", d.Failures)
	}
	for _, c := range []string{"status", "contentType", "cors", "shape", "signature", "identityKey"} {
		if !d.Checks[c] {
			t.Errorf("check %s failed or missing: %v", c, d.Checks)
		}
	}
	if d.URL != n.HTTPURL()+"/.well-known/snap-agent.json" {
		t.Errorf("fetched %s", d.URL)
	}
	if d.Signed.Card.Identity != n.Address() || d.Signed.Card.Name != n.Card().Name {
		t.Errorf("card identity %s name %q, want the node's %s %q", d.Signed.Card.Identity, d.Signed.Card.Name, n.Address(), n.Card().Name)
	}
	if d.Signed.PublicKey != hex.EncodeToString(addr.Key[:]) {
		t.Errorf("publicKey %s, want the node's output key %x", d.Signed.PublicKey, addr.Key)
	}
	if age := time.Now().Unix() - d.Signed.Timestamp; age < -60 || age > 60 {
		t.Errorf("card timestamp %d is %d s from now", d.Signed.Timestamp, age)
	}

	// Tampered copies of the node's own signed card.
	res, err := http.Get(n.HTTPURL() + "/.well-known/snap-agent.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	tamper := []struct {
		name     string
		edit     func(signed, card map[string]any)
		failures []string
	}{
		{"name changed", func(_, card map[string]any) { card["name"] = "mallory" }, []string{"signature"}},
		{"timestamp changed", func(signed, _ map[string]any) { signed["timestamp"] = signed["timestamp"].(float64) + 1 }, []string{"signature"}},
		{"identity of another key", func(_, card map[string]any) { card["identity"] = newKey(t).Address(identity.Mainnet) },
			[]string{"signature", "identityKey"}},
	}
	for _, c := range tamper {
		t.Run(c.name, func(t *testing.T) {
			var signed map[string]any
			if err := json.Unmarshal(raw, &signed); err != nil {
				t.Fatal(err)
			}
			c.edit(signed, signed["card"].(map[string]any))
			body, _ := json.Marshal(signed)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Access-Control-Allow-Origin", "*")
				w.Write(body)
			}))
			defer srv.Close()
			d := jsDiscover(t, srv.URL, jsinterop.ExitFail)
			if d.Verified || !slices.Equal(d.Failures, c.failures) {
				t.Errorf("tampered card: verified %v, failures %v; want %v", d.Verified, d.Failures, c.failures)
			}
		})
	}
}
