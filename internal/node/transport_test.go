package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// transport is one way a requester, with an identity of its own, carries
// SNAP to a node: Nostr through the embedded relay, HTTP (SSE for
// streams), or WebSocket.
type transport interface {
	// Send and Stream go through the requester's client: the request
	// is signed by its key and every answer verified (client.Transport).
	// An error from Stream's onEvent ends the exchange at once — the
	// connection is dropped, over Nostr the subscription — and is
	// returned.
	client.Transport
	// exchange sends raw, a serialized SNAP message, byte for byte, and
	// returns everything that answered it (see exchanged).
	exchange(ctx context.Context, raw []byte, o rawOptions) (exchanged, error)
}

// rawOptions shape one exchange of a raw message.
type rawOptions struct {
	// stream asks for server-sent events (HTTP only; WebSocket and Nostr
	// stream whatever asks to be streamed).
	stream bool
	// sealer signs and seals the Nostr event carrying the message (Nostr
	// only); nil: the requester's key.
	sealer *identity.Key
	// notNIP44 puts garbage in the Nostr event's content instead of the
	// sealed message (Nostr only).
	notNIP44 bool
}

// exchanged is everything that answered one raw message, in order of
// arrival, each answer verified (signed by the node, valid, a response or
// an event). It is complete: over HTTP the whole body (an SSE stream runs
// until the body ends), over WebSocket every frame before the answer to a
// probe request sent after the message on the same connection (requests
// on a connection are answered in order), over Nostr every reply the relay
// holds once the response arrived (the request is of the stored kind).
type exchanged struct {
	status  int    // the HTTP status (HTTP only)
	body    []byte // the body of an HTTP answer other than 200
	answers []*snap.Verified
}

// responses counts the responses among the answers.
func (x exchanged) responses() int {
	n := 0
	for _, a := range x.answers {
		if a.Type == snap.TypeResponse {
			n++
		}
	}
	return n
}

// answerChecker verifies what a node sent, as every transport's
// requester must: the message validates (syntax, timestamp, replay across
// the whole transport), it is signed, by the node, and is a response or
// an event. Whom it is addressed to is each case's business.
type answerChecker struct {
	node string
	v    *snap.Validator
}

func newAnswerChecker(n *node.Node) *answerChecker {
	return &answerChecker{node: n.Address(), v: snap.NewValidator(snap.Config{Replay: snap.NewMemoryReplayStore(10_000)})}
}

func (c *answerChecker) check(ctx context.Context, raw []byte) (*snap.Verified, error) {
	got, err := c.v.Validate(ctx, raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("an answer does not validate: %w (%s)", err, raw)
	case !got.Signed:
		return nil, fmt.Errorf("an unsigned answer: %s", raw)
	case got.From != c.node:
		return nil, fmt.Errorf("an answer from %s, not the node %s", got.From, c.node)
	case got.Type != snap.TypeResponse && got.Type != snap.TypeEvent:
		return nil, fmt.Errorf("an answer of type %s", got.Type)
	}
	return got, nil
}

// nostrTransport carries SNAP over the node's embedded relay.
type nostrTransport struct {
	client.Transport
	n     *node.Node
	key   *identity.Key
	pool  *relay.Pool
	check *answerChecker
}

var _ transport = (*nostrTransport)(nil)

func dialNostr(t *testing.T, n *node.Node, k *identity.Key) transport {
	r := newRequesterWith(t, n.RelayURLs(), k)
	agent := r.client.To(client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()}, false)
	return &nostrTransport{Transport: agent, n: n, key: k, pool: r.pool, check: newAnswerChecker(n)}
}

func (r *nostrTransport) exchange(ctx context.Context, raw []byte, o rawOptions) (exchanged, error) {
	var x exchanged
	sealer := o.sealer
	if sealer == nil {
		sealer = r.key
	}
	nodePub := r.n.NostrPublicKey()
	ck, err := nip44.GenerateConversationKey(nodePub, sealer.NostrSecretKey())
	if err != nil {
		return x, err
	}
	content := "this is not a NIP-44 payload"
	if !o.notNIP44 {
		if content, err = nip44.Encrypt(string(raw), ck); err != nil {
			return x, err
		}
	}
	now := time.Now()
	ev := nostr.Event{CreatedAt: nostr.Timestamp(now.Unix()), Kind: relay.KindMessage,
		Tags: nostr.Tags{{"p", nodePub}}, Content: content}
	if err := ev.Sign(sealer.NostrSecretKey()); err != nil {
		return x, err
	}
	since := nostr.Timestamp(now.Add(-snap.DefaultMaxDrift).Unix())
	sub, err := r.pool.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Since: &since,
		Tags: nostr.TagMap{"p": {sealer.NostrPublicKey()}, "e": {ev.ID}}})
	if err != nil {
		return x, err
	}
	defer sub.Close()
	if _, err := r.pool.Publish(ctx, ev); err != nil {
		return x, err
	}
	seen := map[string]bool{}
	for x.responses() == 0 {
		select {
		case <-ctx.Done():
			return x, fmt.Errorf("no response to event %s after %d answers: %w", ev.ID, len(x.answers), ctx.Err())
		case rev, ok := <-sub.Events():
			if !ok {
				return x, fmt.Errorf("the subscription ended: %w", sub.Err())
			}
			if rev.PubKey != nodePub {
				return x, fmt.Errorf("a reply signed by %s, not the node", rev.PubKey)
			}
			plain, err := nip44.Decrypt(rev.Content, ck)
			if err != nil {
				return x, fmt.Errorf("a reply does not open: %w", err)
			}
			got, err := r.check.check(ctx, []byte(plain))
			if err != nil {
				return x, err
			}
			seen[rev.ID] = true
			x.answers = append(x.answers, got)
		}
	}
	// Replies are published one after the other, the response last:
	// the relay now holds them all.
	stored, err := r.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{nodePub},
		Tags: nostr.TagMap{"e": {ev.ID}}})
	if err != nil {
		return x, err
	}
	for _, s := range stored {
		if !seen[s.ID] {
			return x, fmt.Errorf("the relay holds a reply %s that was not received", s.ID)
		}
	}
	if len(stored) != len(x.answers) {
		return x, fmt.Errorf("the relay holds %d replies, %d were received", len(stored), len(x.answers))
	}
	return x, nil
}

// httpTransport carries SNAP over POST /snap, SSE for streams.
type httpTransport struct {
	client.Transport
	n      *node.Node
	url    string
	client *client.HTTP // for service/call, answered outside SNAP
	http   *http.Client
	check  *answerChecker
}

var _ transport = (*httpTransport)(nil)

func dialHTTP(t *testing.T, n *node.Node, k *identity.Key) transport {
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	url, c := n.HTTPURL()+"/snap", client.NewHTTP(client.HTTPConfig{Key: k, HTTP: hc})
	return &httpTransport{Transport: c.To(url, n.Address()), n: n, url: url, client: c, http: hc, check: newAnswerChecker(n)}
}

func (h *httpTransport) exchange(ctx context.Context, raw []byte, o rawOptions) (exchanged, error) {
	var x exchanged
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(raw))
	if err != nil {
		return x, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return x, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return x, err
	}
	x.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		x.body = body
		return x, nil
	}
	var msgs [][]byte
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "application/json":
		msgs = [][]byte{body}
	case "text/event-stream":
		// "data: <one-line JSON>" and a blank line per message, LF only,
		// nothing after the last.
		frames := bytes.Split(body, []byte("\n\n"))
		if len(frames[len(frames)-1]) != 0 {
			return x, fmt.Errorf("the SSE body does not end with a blank line: %q", frames[len(frames)-1])
		}
		for _, f := range frames[:len(frames)-1] {
			data, ok := bytes.CutPrefix(f, []byte("data: "))
			if !ok || bytes.ContainsAny(data, "\r\n") {
				return x, fmt.Errorf("an SSE frame that is not one data line: %q", f)
			}
			msgs = append(msgs, data)
		}
	default:
		return x, fmt.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	for _, m := range msgs {
		got, err := h.check.check(ctx, m)
		if err != nil {
			return x, err
		}
		x.answers = append(x.answers, got)
	}
	return x, nil
}

// wsTransport carries SNAP over a WebSocket on /snap, one connection per
// exchange as SDK clients do.
type wsTransport struct {
	client.Transport
	n     *node.Node
	url   string
	probe *identity.Key // signs the probe that ends a raw exchange
	check *answerChecker
}

var _ transport = (*wsTransport)(nil)

func dialWS(t *testing.T, n *node.Node, k *identity.Key) transport {
	probe, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(n.HTTPURL(), "http") + "/snap"
	return &wsTransport{n: n, url: url, probe: probe, check: newAnswerChecker(n),
		Transport: client.NewHTTP(client.HTTPConfig{Key: k}).To(url, n.Address())}
}

func (w *wsTransport) exchange(ctx context.Context, raw []byte, _ rawOptions) (exchanged, error) {
	var x exchanged
	probeReq := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: w.probe.Address(identity.Mainnet),
		To: w.n.Address(), Type: snap.TypeRequest, Method: "tasks/get", Payload: []byte(`{"taskId":"probe"}`), Timestamp: time.Now().Unix()}
	if err := probeReq.Sign(w.probe); err != nil {
		return x, err
	}
	probe, err := probeReq.MarshalJSON()
	if err != nil {
		return x, err
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, w.url, nil)
	if err != nil {
		return x, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.NetConn().SetDeadline(time.Now()) })
	defer stop()
	for _, m := range [][]byte{raw, probe} {
		if err := conn.WriteMessage(websocket.TextMessage, m); err != nil {
			return x, err
		}
	}
	for {
		typ, data, err := conn.ReadMessage()
		if err != nil {
			return x, fmt.Errorf("after %d answers: %w", len(x.answers), err)
		}
		if typ != websocket.TextMessage {
			return x, fmt.Errorf("a frame of type %d", typ)
		}
		got, err := w.check.check(ctx, data)
		if err != nil {
			return x, err
		}
		if got.To == probeReq.From {
			if got.Type != snap.TypeResponse || got.Method != "tasks/get" || errCodeOf(got) != int(snap.CodeTaskNotFound) {
				return x, fmt.Errorf("the probe was answered by %s", got.Payload)
			}
			return x, nil
		}
		x.answers = append(x.answers, got)
	}
}

func errCodeOf(m *snap.Verified) int {
	if e := snap.ResponseError(m.Payload); e != nil {
		return int(e.Code)
	}
	return 0
}

// transportEnv is what a case runs against: a node and, over one
// transport, two requesters.
type transportEnv struct {
	kind    string // "nostr", "http" or "ws"
	n       *node.Node
	dataDir string
	alice   *identity.Key
	tr      transport // alice's
	bobKey  *identity.Key
	bob     transport // bob's, another identity
}

func (e *transportEnv) self() string { return e.alice.Address(identity.Mainnet) }

// call sends a request as alice through her transport's client and
// returns the payload of its response, checked to be the node's response
// to her, of method.
func (e *transportEnv) call(t *testing.T, method string, payload any) map[string]any {
	t.Helper()
	return e.callAs(t, e.tr, e.self(), method, payload)
}

func (e *transportEnv) callAs(t *testing.T, tr transport, self, method string, payload any) map[string]any {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := tr.Send(ctx, method, body)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Type != snap.TypeResponse || resp.Method != method || resp.From != e.n.Address() || resp.To != self {
		t.Fatalf("%s answered by a %s of %s from %s to %s", method, resp.Type, resp.Method, resp.From, resp.To)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// serviceCall calls the service name through tr and returns its reply,
// or the code of its refusal. Over HTTP the reply is the service's own
// body, a refusal an HTTP status carrying the SNAP error (403 for 2003);
// over Nostr and WebSocket both are the payload of a signed response.
func (e *transportEnv) serviceCall(t *testing.T, tr transport, name string, args any) (map[string]any, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var p map[string]any
	if h, ok := tr.(*httpTransport); ok {
		reply, err := h.client.Call(ctx, h.url, "", name, args)
		var se *client.StatusError
		switch {
		case errors.As(err, &se) && se.Err != nil:
			if want := map[snap.Code]int{snap.CodeIdentityMismatch: http.StatusForbidden, snap.CodeSkillNotFound: http.StatusNotFound,
				snap.CodeInvalidPayload: http.StatusBadRequest}[se.Err.Code]; se.StatusCode != want {
				t.Errorf("error %d over HTTP %d, want %d", se.Err.Code, se.StatusCode, want)
			}
			return nil, int(se.Err.Code)
		case err != nil:
			t.Fatalf("service %s: %v", name, err)
		}
		if err := json.Unmarshal(reply, &p); err != nil {
			t.Fatal(err)
		}
		return p, 0
	}
	payload := map[string]any{"name": name}
	if args != nil {
		payload["arguments"] = args
	}
	self := e.self()
	if tr == e.bob {
		self = e.bobKey.Address(identity.Mainnet)
	}
	p = e.callAs(t, tr, self, servicecall.Method, payload)
	return p, errCode(p)
}

// stream sends a streaming request as alice through her transport's
// client and collects its events; onEvent, when set, sees each as it
// arrives and may end the exchange with an error, which is returned.
func (e *transportEnv) stream(t *testing.T, ctx context.Context, method string, payload any, onEvent func(streamEvent) error) (streamed, error) {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	var s streamed
	final, err := e.tr.Stream(ctx, method, body, func(ev *snap.Message) error {
		if ev.Type != snap.TypeEvent || ev.Method != method || ev.From != e.n.Address() || ev.To != e.self() {
			return fmt.Errorf("event envelope: %s of %s from %s to %s", ev.Type, ev.Method, ev.From, ev.To)
		}
		var se streamEvent
		if err := json.Unmarshal(ev.Payload, &se); err != nil {
			return err
		}
		s.events = append(s.events, se)
		if onEvent != nil {
			return onEvent(se)
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	if final.Type != snap.TypeResponse || final.Method != method || final.To != e.self() {
		t.Fatalf("%s ended by a %s of %s to %s", method, final.Type, final.Method, final.To)
	}
	if err := json.Unmarshal(final.Payload, &s.final); err != nil {
		t.Fatal(err)
	}
	return s, nil
}

// mustStream is stream for an exchange that must end with its response.
func (e *transportEnv) mustStream(t *testing.T, method string, payload any) streamed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := e.stream(t, ctx, method, payload, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return s
}

// request is an unsigned request of method from k to the node, dated now.
func (e *transportEnv) request(t *testing.T, k *identity.Key, method string, payload any) *snap.Message {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet), To: e.n.Address(),
		Type: snap.TypeRequest, Method: method, Payload: body, Timestamp: time.Now().Unix()}
}

// signed signs m with k and serializes it.
func signed(t *testing.T, m *snap.Message, k *identity.Key) []byte {
	t.Helper()
	if err := m.Sign(k); err != nil {
		t.Fatal(err)
	}
	return serialized(t, m)
}

func serialized(t *testing.T, m *snap.Message) []byte {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchange sends raw as it is and fails the test when the transport
// fails.
func (e *transportEnv) exchange(t *testing.T, raw []byte, o rawOptions) exchanged {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := e.tr.exchange(ctx, raw, o)
	if err != nil {
		t.Fatalf("exchange of %.200s: %v", raw, err)
	}
	return x
}

// only answers x's single answer, failing unless there is exactly one
// answer and it is a response.
func only(t *testing.T, x exchanged) (*snap.Verified, map[string]any) {
	t.Helper()
	if x.status != 0 && x.status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", x.status, x.body)
	}
	if len(x.answers) != 1 || x.answers[0].Type != snap.TypeResponse {
		var kinds []string
		for _, a := range x.answers {
			kinds = append(kinds, string(a.Type)+" "+string(a.Payload))
		}
		t.Fatalf("want exactly one answer, a response; got %d: %v", len(x.answers), kinds)
	}
	var p map[string]any
	if err := json.Unmarshal(x.answers[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	return x.answers[0], p
}

// refusal is an error class: a message the node must refuse, and how.
type refusal struct {
	// build makes the message; opts shape its exchange.
	build func(t *testing.T, e *transportEnv) (raw []byte, opts rawOptions)
	code  snap.Code
	// field is the error's data.field, when the class names one.
	field string
	// data are more members of the error's data that must be there.
	data func(e *transportEnv, raw []byte) map[string]any
	// anonymous: the message cannot name its sender, so the answer is
	// addressed to no one and echoes no method (method "snap/error").
	anonymous bool
	// httpStatus, when set, is the HTTP status refusing the message over
	// HTTP, whose body then carries {"error":{"code": code, "data":
	// {"status": httpStatus}}} instead of
	// a SNAP response.
	httpStatus int
}

// run sends the refused message once and checks that the refusal always
// arrives: one answer, a signed response carrying the code, addressed to
// the sender when it can be named, echoing the method, and no event.
func (r refusal) run(t *testing.T, e *transportEnv) {
	raw, opts := r.build(t, e)
	x := e.exchange(t, raw, opts)
	if r.httpStatus != 0 && e.kind == "http" {
		var body struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Status int `json:"status"`
				} `json:"data"`
			} `json:"error"`
		}
		if x.status != r.httpStatus || json.Unmarshal(x.body, &body) != nil || body.Error.Code != int(r.code) || body.Error.Data.Status != r.httpStatus {
			t.Fatalf("HTTP %d %s; want %d with error code %d", x.status, x.body, r.httpStatus, r.code)
		}
		if len(x.answers) != 0 {
			t.Fatalf("HTTP %d and SNAP answers too", x.status)
		}
		return
	}
	resp, p := only(t, x)
	se := snap.ResponseError(resp.Payload)
	if se == nil || se.Code != r.code {
		t.Fatalf("answer %s, want error %d", resp.Payload, r.code)
	}
	if r.field != "" && se.Field() != r.field {
		t.Errorf("error data.field %q, want %q (%s)", se.Field(), r.field, resp.Payload)
	}
	if r.data != nil {
		for k, want := range r.data(e, raw) {
			got, _ := json.Marshal(se.Data[k])
			if w, _ := json.Marshal(want); string(got) != string(w) {
				t.Errorf("error data.%s = %s, want %v (%s)", k, got, want, resp.Payload)
			}
		}
	}
	var head struct{ From, Method string }
	_ = json.Unmarshal(raw, &head)
	switch {
	case r.anonymous:
		if resp.To != "" || resp.Method != "snap/error" {
			t.Errorf("answer to %q of %q; want one to no one, of snap/error", resp.To, resp.Method)
		}
	default:
		if resp.To != head.From || resp.Method != head.Method {
			t.Errorf("answer to %q of %q; want to the sender %q, of %q", resp.To, resp.Method, head.From, head.Method)
		}
	}
	if len(p) != 1 {
		t.Errorf("an error payload with more than the error: %v", p)
	}
}

// idOf reads the id of a serialized message.
func idOf(raw []byte) string {
	var m struct{ ID string }
	_ = json.Unmarshal(raw, &m)
	return m.ID
}

// transportCases is the one table every transport runs.
var transportCases = []struct {
	name string
	// only names the one transport the case exists on ("" for all):
	// Nostr alone authenticates the sender twice (the event's key and
	// the message's signature) and seals the message.
	only string
	run  func(t *testing.T, e *transportEnv)
}{
	{"message/send", "", func(t *testing.T, e *transportEnv) {
		// Free text on a node without an agent: failed at once, with
		// how to enable one.
		p := e.call(t, "message/send", text("hello-over-"+e.kind))
		if p["task"].(map[string]any)["contextId"] == nil {
			t.Fatalf("message/send: %v", p)
		}
		noAgent(t, "message/send", taskOf(t, p))
		w := taskOf(t, e.call(t, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/send-" + e.kind + ".txt", "content": "x\n"})))
		if w.Status.State != "completed" || len(w.Artifacts) != 2 {
			t.Fatalf("a proposal over message/send: %+v", w)
		}
	}},
	{"message/send retried: the original result, deduplicated", "", func(t *testing.T, e *transportEnv) {
		ctx := context.Background()
		before, err := e.n.Tasks.List(ctx, tasks.Filter{Owner: e.self()})
		if err != nil {
			t.Fatal(err)
		}
		raw := signed(t, e.request(t, e.alice, "message/send", text("once")), e.alice)
		_, first := only(t, e.exchange(t, raw, rawOptions{}))
		_, again := only(t, e.exchange(t, raw, rawOptions{}))
		if taskOf(t, first).ID != taskOf(t, again).ID || first["deduplicated"] != nil || again["deduplicated"] != true {
			t.Fatalf("first %v, retried %v; want the same task, the retry marked deduplicated", first, again)
		}
		after, err := e.n.Tasks.List(ctx, tasks.Filter{Owner: e.self()})
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before)+1 {
			t.Errorf("%d tasks created by a message sent twice, want 1", len(after)-len(before))
		}
	}},
	{"duplicate request: 2006", "", func(t *testing.T, e *transportEnv) {
		id := taskOf(t, e.call(t, "message/send", text("dup"))).ID
		raw := signed(t, e.request(t, e.alice, "tasks/get", map[string]any{"taskId": id}), e.alice)
		if _, p := only(t, e.exchange(t, raw, rawOptions{})); taskOf(t, p).ID != id {
			t.Fatalf("first tasks/get: %v", p)
		}
		resp, p := only(t, e.exchange(t, raw, rawOptions{}))
		se := snap.ResponseError(resp.Payload)
		if se == nil || se.Code != snap.CodeDuplicateMessage || se.Data["id"] != idOf(raw) || resp.To != e.self() || resp.Method != "tasks/get" {
			t.Fatalf("the same tasks/get again: %v to %s; want 2006 naming the id", p, resp.To)
		}
	}},
	{"tasks/get", "", func(t *testing.T, e *transportEnv) {
		id := taskOf(t, e.call(t, "message/send", text("get-me"))).ID
		got := e.call(t, "tasks/get", map[string]any{"taskId": id, "historyLength": 0})
		v := taskOf(t, got)
		if v.ID != id {
			t.Fatalf("tasks/get: %v", got)
		}
		noAgent(t, "tasks/get", v)
		if h, _ := got["task"].(map[string]any)["history"].([]any); len(h) != 0 {
			t.Errorf("historyLength 0 returned %d messages", len(h))
		}
		if p := e.callAs(t, e.bob, e.bobKey.Address(identity.Mainnet), "tasks/get", map[string]any{"taskId": id}); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Errorf("another identity read the task: %v", p)
		}
	}},
	{"tasks/cancel", "", func(t *testing.T, e *transportEnv) {
		// A delete held for the operator: live until canceled.
		file := "cancel-" + e.kind + ".txt"
		id := heldTask(t, func(payload any) map[string]any { return e.call(t, "message/send", payload) }, file).ID
		if p := e.callAs(t, e.bob, e.bobKey.Address(identity.Mainnet), "tasks/cancel", map[string]any{"taskId": id}); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Errorf("another identity canceled the task: %v", p)
		}
		for _, round := range []string{"cancel", "cancel again (idempotent)"} {
			if v := taskOf(t, e.call(t, "tasks/cancel", map[string]any{"taskId": id})); v.ID != id || v.Status.State != "canceled" {
				t.Fatalf("%s: %+v", round, v)
			}
		}
		if _, err := os.Stat(filepath.Join(e.dataDir, "sandbox", file)); err != nil {
			t.Errorf("the canceled delete removed the file: %v", err)
		}
	}},
	{"service/call: the service's own reply; a caller off the allowlist refused", "", func(t *testing.T, e *transportEnv) {
		reply, code := e.serviceCall(t, e.tr, "status", nil)
		if code != 0 || reply["address"] != e.n.Address() || reply["tasks"] == nil {
			t.Fatalf("status: %v (error %d)", reply, code)
		}
		if _, code := e.serviceCall(t, e.tr, "no-such-service", nil); code != int(snap.CodeSkillNotFound) {
			t.Errorf("an unknown service: error %d, want 3005", code)
		}
		if _, code := e.serviceCall(t, e.tr, "status", map[string]any{"verbose": true}); code != int(snap.CodeInvalidPayload) {
			t.Errorf("an argument status does not take: error %d, want 1004", code)
		}
		if _, code := e.serviceCall(t, e.bob, "status", nil); code != int(snap.CodeIdentityMismatch) {
			t.Errorf("bob, off the allowlist: error %d, want 2003", code)
		}
	}},
	{"message/stream: events in version order, one final response", "", func(t *testing.T, e *transportEnv) {
		s := e.mustStream(t, "message/stream", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/stream-" + e.kind + ".txt", "content": "streamed\n"}))
		if got := s.summary(); got != "1:submitted 2:working 3:result 4:diff 5:completed" {
			t.Fatalf("events %s", got)
		}
		final := taskOf(t, s.final)
		if final.Status.State != "completed" || len(final.Artifacts) != 2 || final.ID != s.events[0].TaskID {
			t.Fatalf("final task %+v", final)
		}
		e.storedVersions(t, final.ID, s.versions(t))

		// Raw, every answer seen: the events, then exactly one
		// response, the last answer.
		raw := signed(t, e.request(t, e.alice, "message/stream", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/raw-" + e.kind + ".txt", "content": "raw\n"})), e.alice)
		x := e.exchange(t, raw, rawOptions{stream: true})
		if n := len(x.answers); n < 2 || x.responses() != 1 || x.answers[n-1].Type != snap.TypeResponse {
			t.Fatalf("%d answers, %d responses; want events then exactly one response, last", n, x.responses())
		}
		var r streamed
		for _, a := range x.answers[:len(x.answers)-1] {
			var se streamEvent
			if a.Method != "message/stream" || a.To != e.self() || json.Unmarshal(a.Payload, &se) != nil {
				t.Fatalf("event %s of %s to %s", a.Payload, a.Method, a.To)
			}
			r.events = append(r.events, se)
		}
		if got := r.summary(); got != "1:submitted 2:working 3:result 4:diff 5:completed" {
			t.Fatalf("raw events %s", got)
		}
		_, r.final = only(t, exchanged{answers: x.answers[len(x.answers)-1:]})
		if ft := taskOf(t, r.final); ft.Status.State != r.events[len(r.events)-1].State || ft.ID != r.events[0].TaskID {
			t.Errorf("the final task %+v is not where the last event left it", ft)
		}
		e.storedVersions(t, r.events[0].TaskID, r.versions(t))
	}},
	{"tasks/resubscribe of an ended task", "", func(t *testing.T, e *transportEnv) {
		s := e.mustStream(t, "message/stream", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/resub-" + e.kind + ".txt", "content": "r\n"}))
		id := s.events[0].TaskID
		all := e.mustStream(t, "tasks/resubscribe", map[string]any{"taskId": id})
		if got := all.summary(); got != "current:completed 1:submitted 2:working 3:result 4:diff 5:completed" {
			t.Errorf("resubscribe replaying all: %s", got)
		}
		after := e.mustStream(t, "tasks/resubscribe", map[string]any{"taskId": id, "afterVersion": 3})
		if got := after.summary(); got != "current:completed 4:diff 5:completed" {
			t.Errorf("resubscribe after version 3: %s", got)
		}
		// Members the node does not define are ignored, as SNAP's
		// receivers must: the reference SDK types tasks/resubscribe's
		// payload as tasks/get's (historyLength), and a sender may add
		// x- extensions. Before, each was refused 1004.
		sdk := e.mustStream(t, "tasks/resubscribe", map[string]any{"taskId": id, "historyLength": 1, "x-trace": "t1"})
		if got := sdk.summary(); got != "current:completed 1:submitted 2:working 3:result 4:diff 5:completed" {
			t.Errorf("resubscribe with members the node does not define: %s", got)
		}
		for _, r := range []streamed{all, after, sdk} {
			if ft := taskOf(t, r.final); ft.ID != id || ft.Status.State != "completed" {
				t.Errorf("final %v", r.final)
			}
		}
	}},
	{"tasks/resubscribe after a dropped connection", "", func(t *testing.T, e *transportEnv) {
		file := "/sandbox/drop-" + e.kind + ".txt"
		if w := taskOf(t, e.call(t, "message/send", proposal("WRITE_FILE", map[string]any{"path": file, "content": "x\n"}))); w.Status.State != "completed" {
			t.Fatalf("write: %+v", w)
		}
		// A held delete streams 1:submitted 2:working 3:pending
		// 4:input_required; the requester drops the connection once
		// it saw version 2.
		errDropped := errors.New("dropped by the requester")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		first, err := e.stream(t, ctx, "message/stream", proposal("DELETE_FILE", map[string]any{"path": file}), func(ev streamEvent) error {
			if ev.Version >= 2 {
				cancel()
				return errDropped
			}
			return nil
		})
		if !errors.Is(err, errDropped) {
			t.Fatalf("the dropped stream ended with %v", err)
		}
		seen := first.versions(t)
		if fmt.Sprint(seen) != "[1 2]" {
			t.Fatalf("before the drop: %s", first.summary())
		}
		id := first.events[0].TaskID

		// Resubscribe after the last version seen; the operator
		// approves once the stream is open.
		approved := make(chan error, 1)
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		r, err := e.stream(t, rctx, "tasks/resubscribe", map[string]any{"taskId": id, "afterVersion": seen[len(seen)-1]}, func(ev streamEvent) error {
			if ev.Current {
				go func() {
					_, err := admin.Call(rctx, admin.Path(e.dataDir), admin.Request{Op: "approve", Task: id})
					approved <- err
				}()
			}
			return nil
		})
		if err != nil {
			t.Fatalf("resubscribe: %v", err)
		}
		if len(r.events) == 0 || r.events[0].String() != "current:input_required" {
			t.Fatalf("the resubscription began with %s", r.summary())
		}
		if err := <-approved; err != nil { // sent: the current state came
			t.Fatalf("approve: %v", err)
		}
		if !strings.HasPrefix(r.summary(), "current:input_required 3:pending 4:input_required ") {
			t.Errorf("the resubscription did not resume at version 3: %s", r.summary())
		}
		final := taskOf(t, r.final)
		if final.Status.State != "completed" || r.events[len(r.events)-1].State != "completed" {
			t.Fatalf("final %+v after %s", final, r.summary())
		}
		e.storedVersions(t, id, append(seen, r.versions(t)...))
	}},

	// Error classes: the refusal always arrives, with its code.
	{"bad signature: 2001", "", refusal{code: snap.CodeSignatureInvalid, field: "sig",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			if err := m.Sign(e.alice); err != nil {
				t.Fatal(err)
			}
			// Another hex digit in the middle of s: still well formed.
			flip := []byte(m.Sig)
			if flip[40] == '0' {
				flip[40] = '1'
			} else {
				flip[40] = '0'
			}
			m.Sig = string(flip)
			return serialized(t, m), rawOptions{}
		}}.run},
	{"signature missing: 2002", "", refusal{code: snap.CodeSignatureMissing, field: "sig",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return serialized(t, e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})), rawOptions{}
		}}.run},
	{"expired timestamp: 2004", "", refusal{code: snap.CodeTimestampExpired,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			m.Timestamp -= 3600
			return signed(t, m, e.alice), rawOptions{}
		},
		data: func(e *transportEnv, raw []byte) map[string]any {
			var m struct{ Timestamp int64 }
			_ = json.Unmarshal(raw, &m)
			return map[string]any{"provided": m.Timestamp, "maxDrift": 60}
		}}.run},
	{"timestamp ahead: 2004", "", refusal{code: snap.CodeTimestampExpired,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			m.Timestamp += 3600
			return signed(t, m, e.alice), rawOptions{}
		},
		data: func(e *transportEnv, raw []byte) map[string]any {
			var m struct{ Timestamp int64 }
			_ = json.Unmarshal(raw, &m)
			return map[string]any{"provided": m.Timestamp, "maxDrift": 60}
		}}.run},
	// The window's edges, where the clock's second cannot move the
	// answer: 60 s ahead is in (later, it is nearer), 61 s behind out.
	{"timestamp at the window's edges", "", func(t *testing.T, e *transportEnv) {
		m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "no-such-task"})
		m.Timestamp += 60
		resp, _ := only(t, e.exchange(t, signed(t, m, e.alice), rawOptions{}))
		if se := snap.ResponseError(resp.Payload); se == nil || se.Code != snap.CodeTaskNotFound {
			t.Errorf("60 s ahead: %s, want past the timestamp (1001)", resp.Payload)
		}
		refusal{code: snap.CodeTimestampExpired, build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			m.Timestamp -= 61
			return signed(t, m, e.alice), rawOptions{}
		}}.run(t, e)
	}},
	{"identity mismatch (Nostr key not from's): 2003", "nostr", refusal{code: snap.CodeIdentityMismatch,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			other, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			return signed(t, e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"}), e.alice), rawOptions{sealer: other}
		}}.run},
	{"wrong recipient: 1004 to", "", refusal{code: snap.CodeInvalidPayload, field: "to",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			other, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			m.To = other.Address(identity.Mainnet)
			return signed(t, m, e.alice), rawOptions{}
		}}.run},
	{"unknown method: 1007", "", refusal{code: snap.CodeMethodNotFound,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return signed(t, e.request(t, e.alice, "foo/bar", map[string]any{}), e.alice), rawOptions{}
		},
		data: func(*transportEnv, []byte) map[string]any { return map[string]any{"method": "foo/bar"} }}.run},
	{"invalid payload: 1004 naming the field", "", refusal{code: snap.CodeInvalidPayload, field: "payload.message.role",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return signed(t, e.request(t, e.alice, "message/send", map[string]any{"message": map[string]any{
				"messageId": "m-1", "role": "robot", "parts": []any{map[string]any{"text": "x"}}}}), e.alice), rawOptions{}
		}}.run},
	{"missing envelope field: 1004 naming it", "", refusal{code: snap.CodeInvalidPayload, field: "id",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(signed(t, e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"}), e.alice), &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "id")
			b, _ := json.Marshal(m)
			return b, rawOptions{}
		}}.run},
	{"task not found: 1001", "", refusal{code: snap.CodeTaskNotFound,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return signed(t, e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "no-such-task"}), e.alice), rawOptions{}
		},
		data: func(*transportEnv, []byte) map[string]any { return map[string]any{"taskId": "no-such-task"} }}.run},
	{"not cancelable: 1002", "", refusal{code: snap.CodeTaskNotCancelable,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			w := taskOf(t, e.call(t, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/done-" + e.kind + ".txt", "content": "d\n"})))
			if w.Status.State != "completed" {
				t.Fatalf("write: %+v", w)
			}
			return signed(t, e.request(t, e.alice, "tasks/cancel", map[string]any{"taskId": w.ID}), e.alice), rawOptions{}
		},
		data: func(*transportEnv, []byte) map[string]any { return map[string]any{"state": "completed"} }}.run},
	{"unsupported version: 5004", "", refusal{code: snap.CodeVersionNotSupported,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			m := e.request(t, e.alice, "tasks/get", map[string]any{"taskId": "x"})
			m.Version = "1.0"
			return signed(t, m, e.alice), rawOptions{}
		},
		data: func(*transportEnv, []byte) map[string]any { return map[string]any{"requested": "1.0"} }}.run},
	{"malformed JSON: 1003 (HTTP 400)", "", refusal{code: snap.CodeInvalidMessage, anonymous: true, httpStatus: http.StatusBadRequest,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return []byte(`{"id":"half a message",`), rawOptions{}
		}}.run},
	{"JSON that is not an object: 1003", "", refusal{code: snap.CodeInvalidMessage, anonymous: true,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return []byte(`["a","message","as","an","array"]`), rawOptions{}
		}}.run},
	{"content not NIP-44: 1003", "nostr", refusal{code: snap.CodeInvalidMessage, anonymous: true, field: "content",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return nil, rawOptions{notNIP44: true}
		}}.run},
	{"message/stream refused: the error, no event", "", refusal{code: snap.CodeInvalidPayload, field: "payload.message.role",
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			return signed(t, e.request(t, e.alice, "message/stream", map[string]any{"message": map[string]any{
				"messageId": "m-2", "role": "robot", "parts": []any{map[string]any{"text": "x"}}}}), e.alice), rawOptions{stream: true}
		}}.run},
	{"tasks/resubscribe of another's task: 1001, no event", "", refusal{code: snap.CodeTaskNotFound,
		build: func(t *testing.T, e *transportEnv) ([]byte, rawOptions) {
			id := taskOf(t, e.call(t, "message/send", text("mine"))).ID
			other, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			return signed(t, e.request(t, other, "tasks/resubscribe", map[string]any{"taskId": id}), other), rawOptions{stream: true, sealer: other}
		}}.run},
}

// storedVersions fails unless seen are exactly the versions of the
// task's stored events: no gap, no duplicate, nothing missed.
func (e *transportEnv) storedVersions(t *testing.T, id string, seen []int64) {
	t.Helper()
	stored, err := e.n.Tasks.TaskEvents(context.Background(), e.self(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, ev := range stored {
		want = append(want, ev.Version)
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("versions seen %v, want the stored %v", seen, want)
	}
}

// The one table of transport cases, over Nostr (the embedded relay), HTTP
// (SSE for streams) and WebSocket, against one node: every method, every
// error class, the order of a stream, and a resubscription after a
// dropped connection.
func TestTransports(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	kinds := []struct {
		name  string
		dial  func(*testing.T, *node.Node, *identity.Key) transport
		alice *identity.Key // may call services; bob, made below, may not
	}{{"nostr", dialNostr, newKey(t)}, {"http", dialHTTP, newKey(t)}, {"ws", dialWS, newKey(t)}}
	n, _ := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPRate = 0 // rate limits are not under test here
		for _, k := range kinds {
			c.ServiceCallers = append(c.ServiceCallers, k.alice.Address(identity.Mainnet))
		}
	})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			alice, bob := k.alice, newKey(t)
			e := &transportEnv{kind: k.name, n: n, dataDir: dataDir, alice: alice, tr: k.dial(t, n, alice), bobKey: bob, bob: k.dial(t, n, bob)}
			for _, c := range transportCases {
				if c.only != "" && c.only != k.name {
					continue
				}
				t.Run(c.name, func(t *testing.T) { c.run(t, e) })
			}
		})
	}
}

func newKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
