package interop

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsinterop"
	"github.com/snapnode/snapnode/snap"
)

// responder is a minimal SNAP node written for these tests: it listens on
// the third-party relay as a node must for the reference SDK to reach it
// (kinds 21339 and 4339, #p = its key), opens the NIP-44 content, binds from
// to the event's pubkey (2003), validates with snap.Validator (replay store,
// recipient check), answers message/send and tasks/get, and replies with the
// same kind, tags p and e, a signed response. It exists to test the JS
// client's request command end to end; the real node is tested against that
// client elsewhere. mode makes it misbehave in one way, so the test can
// check that the client catches it.
type responder struct {
	t     *testing.T
	key   *identity.Key
	addr  string
	relay *wsRelay
	val   *snap.Validator
	mode  string

	mu      sync.Mutex
	results map[string]json.RawMessage // from + "\x00" + id → payload of a message/send
	handled int
}

func startResponder(t *testing.T, url, mode string) *responder {
	t.Helper()
	k := newKey(t)
	r := &responder{t: t, key: k, addr: k.Address(identity.Mainnet), relay: dial(t, url), mode: mode,
		results: map[string]json.RawMessage{}}
	r.val = snap.NewValidator(snap.Config{Self: r.addr, Replay: snap.NewMemoryReplayStore(0)})
	since := nostr.Timestamp(time.Now().Unix() - 5)
	sub := r.relay.Subscribe(nostr.Filter{Kinds: []int{21339, 4339}, Tags: nostr.TagMap{"p": {k.NostrPublicKey()}}, Since: &since})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range sub.Events {
			r.handle(ctx, ev)
		}
	}()
	t.Cleanup(func() {
		cancel()
		sub.Close()
		wg.Wait()
	})
	return r
}

func (r *responder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled
}

// handle answers one request event; test failures are reported with
// t.Errorf, since it runs on the subscription's goroutine.
func (r *responder) handle(ctx context.Context, ev *nostr.Event) {
	r.mu.Lock()
	r.handled++
	r.mu.Unlock()
	conv, err := nip44.GenerateConversationKey(ev.PubKey, r.key.NostrSecretKey())
	if err != nil {
		return
	}
	plain, err := nip44.Decrypt(ev.Content, conv)
	if err != nil {
		return
	}
	var env struct {
		ID     string `json:"id"`
		From   string `json:"from"`
		Type   string `json:"type"`
		Method string `json:"method"`
	}
	if json.Unmarshal([]byte(plain), &env) != nil || env.Type != "request" {
		return
	}
	method := env.Method
	if method == "" {
		method = "message/send"
	}
	var payload any
	var p [32]byte
	hex.Decode(p[:], []byte(ev.PubKey))
	q, err := identity.OutputKeyOf(p)
	switch {
	case err != nil || identity.EncodeAddress(identity.Mainnet, q) != env.From:
		payload = map[string]any{"error": snap.NewError(snap.CodeIdentityMismatch, "from is not the event's signer",
			map[string]any{"from": env.From, "signer": ev.PubKey})}
	default:
		payload = r.route(ctx, env.From, env.ID, method, plain)
	}
	if r.mode == "silent" {
		return
	}
	to := env.From
	if _, err := identity.ParseAddress(to); err != nil {
		to = ""
	}
	resp := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: r.addr, To: to,
		Type: snap.TypeResponse, Method: method, Payload: mustJSON(r.t, payload), Timestamp: time.Now().Unix()}
	signer := r.key
	switch r.mode {
	case "other-from":
		signer = newKey(r.t)
		resp.From = signer.Address(identity.Mainnet)
	case "stale-response":
		resp.Timestamp -= 300
	case "wrong-to":
		resp.To = newKey(r.t).Address(identity.Mainnet)
	case "event-type":
		resp.Type = snap.TypeEvent
	}
	if r.mode != "unsigned" {
		if err := resp.Sign(signer); err != nil {
			r.t.Errorf("responder: sign: %v", err)
			return
		}
	}
	raw, err := resp.MarshalJSON()
	if err != nil {
		r.t.Errorf("responder: marshal: %v", err)
		return
	}
	content, err := nip44.Encrypt(string(raw), conv)
	if err != nil {
		r.t.Errorf("responder: encrypt: %v", err)
		return
	}
	eTag := ev.ID
	if r.mode == "wrong-e" {
		eTag = newKey(r.t).NostrPublicKey() // any other 64-hex id
	}
	reply := nostr.Event{PubKey: r.key.NostrPublicKey(), CreatedAt: nostr.Now(), Kind: ev.Kind,
		Tags: nostr.Tags{{"p", ev.PubKey}, {"e", eTag}}, Content: content}
	if err := reply.Sign(r.key.NostrSecretKey()); err != nil {
		r.t.Errorf("responder: sign event: %v", err)
		return
	}
	copies := 1
	if r.mode == "twice" {
		copies = 2
	}
	for i := 0; i < copies; i++ {
		if i > 0 { // a second, distinct reply event
			reply.Tags = append(reply.Tags, nostr.Tag{"x-copy", strconv.Itoa(i)})
			reply.Sign(r.key.NostrSecretKey())
		}
		if err := r.relay.Publish(reply); err != nil && ctx.Err() == nil {
			r.t.Errorf("responder: publish: %v", err)
		}
	}
}

// route validates the request and runs its method.
func (r *responder) route(ctx context.Context, from, id, method, plain string) any {
	key := from + "\x00" + id
	v, err := r.val.Validate(ctx, []byte(plain))
	var se *snap.Error
	switch {
	case errors.As(err, &se) && se.Code == snap.CodeDuplicateMessage && method == "message/send":
		r.mu.Lock()
		prior := r.results[key]
		r.mu.Unlock()
		if prior != nil {
			var p map[string]any
			json.Unmarshal(prior, &p)
			p["deduplicated"] = true
			return p
		}
		return map[string]any{"error": se}
	case errors.As(err, &se):
		return map[string]any{"error": se}
	case err != nil:
		return map[string]any{"error": snap.NewError(snap.CodeInternal, err.Error(), nil)}
	}
	switch v.Method {
	case "message/send", "tasks/get":
		payload := map[string]any{"task": map[string]any{"id": "task-" + id, "contextId": "ctx-1",
			"status": map[string]any{"state": "submitted", "timestamp": time.Now().UTC().Format(time.RFC3339)}}}
		r.mu.Lock()
		r.results[key] = mustJSON(r.t, payload)
		r.mu.Unlock()
		return payload
	default:
		return map[string]any{"error": snap.NewError(snap.CodeMethodNotFound, "unknown method", map[string]any{"method": v.Method})}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("marshal: %v", err)
	}
	return b
}

// snapResponse is the part of a SNAP response these tests read.
type snapResponse struct {
	ID      string `json:"id"`
	From    string `json:"from"`
	To      string `json:"to"`
	Type    string `json:"type"`
	Method  string `json:"method"`
	Sig     string `json:"sig"`
	Payload struct {
		Task *struct {
			ID string `json:"id"`
		} `json:"task"`
		Deduplicated bool `json:"deduplicated"`
		Error        *struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	} `json:"payload"`
}

func decodeResponse(t *testing.T, rep jsinterop.Reply) snapResponse {
	t.Helper()
	var r snapResponse
	if err := json.Unmarshal(rep.Response, &r); err != nil {
		t.Fatalf("response %s: %v", rep.Response, err)
	}
	return r
}

// request runs `client.mjs request` against the responder.
func request(t *testing.T, url string, node *responder, wantExit int, extra ...string) ([]jsinterop.Reply, []jsinterop.Sent, *identity.Key) {
	t.Helper()
	me := newKey(t)
	args := append([]string{"request", "--relay", url, "--secret", me.Hex(), "--to-pubkey", node.key.NostrPublicKey(),
		"--to-address", node.addr, "--timeout-ms", "10000"}, extra...)
	out, code := jsinterop.Run(t, testCtx(t, time.Minute), args...)
	if code != wantExit {
		t.Fatalf("request %v: exit %d, want %d\n%s", extra, code, wantExit, clip(out))
	}
	replies, sent := jsinterop.Lines(t, out)
	return replies, sent, me
}

// TestJSRequestEndToEnd drives the JS client's request command through
// the third-party relay against the Go responder: a normal exchange, a
// persisted one, and every mutation with the SNAP error it must provoke.
func TestJSRequestEndToEnd(t *testing.T) {
	url := jsinterop.StartRelay(t)
	node := startResponder(t, url, "")

	t.Run("message/send", func(t *testing.T) {
		replies, sent, me := request(t, url, node, jsinterop.ExitOK)
		if len(sent) != 1 || len(replies) != 1 {
			t.Fatalf("%d sent, %d replies", len(sent), len(replies))
		}
		s, rep := sent[0], replies[0]
		if s.Event.Kind != 21339 || len(s.Event.Tags) != 1 || s.Event.Tags[0][0] != "p" || s.Event.Tags[0][1] != node.key.NostrPublicKey() {
			t.Errorf("request event: %+v (want kind 21339, tags [[p, node]])", s.Event)
		}
		if s.Event.PubKey != me.NostrPublicKey() || s.NostrPubkey != me.NostrPublicKey() || s.From != me.Address(identity.Mainnet) {
			t.Errorf("sent by %s / %s, want %s", s.Event.PubKey, s.From, me.NostrPublicKey())
		}
		if !rep.Verified || len(rep.Failures) != 0 {
			t.Fatalf("reply not verified: %v %v", rep.Failures, rep.Reasons)
		}
		for _, c := range []string{"eventId", "eventSig", "author", "kind", "tagP", "tagE", "since", "decrypt", "json",
			"envelope", "type", "sig", "from", "fromBinding", "to", "timestamp", "method"} {
			if !rep.Checks[c] {
				t.Errorf("check %s failed", c)
			}
		}
		r := decodeResponse(t, rep)
		if r.Payload.Task == nil || r.From != node.addr || r.To != me.Address(identity.Mainnet) || r.Method != "message/send" {
			t.Errorf("response %s", rep.Response)
		}
		// The request the JS side sent passes Go's stateless validation too.
		if _, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), s.Request); err != nil {
			t.Errorf("Go rejects the JS request: %v", err)
		}
	})

	t.Run("sdk timing: publish without waiting for EOSE", func(t *testing.T) {
		replies, _, _ := request(t, url, node, jsinterop.ExitOK, "--no-wait-eose")
		if len(replies) != 1 || !replies[0].Verified {
			t.Errorf("replies %+v", replies)
		}
	})

	t.Run("persist", func(t *testing.T) {
		replies, sent, me := request(t, url, node, jsinterop.ExitOK, "--persist", "--method", "tasks/get", "--payload", `{"taskId":"t-1"}`)
		if sent[0].Event.Kind != 4339 || replies[0].Event.Kind != 4339 {
			t.Errorf("kinds: request %d, reply %d; want 4339 both", sent[0].Event.Kind, replies[0].Event.Kind)
		}
		// Both are stored by the relay and can be fetched offline.
		r := dial(t, url)
		if got := ids(r.Query(nostr.Filter{Kinds: []int{4339}, Tags: nostr.TagMap{"p": {node.key.NostrPublicKey()}}})); !slices.Contains(got, sent[0].Event.ID) {
			t.Errorf("the relay did not store the 4339 request: %v", got)
		}
		if got := ids(r.Query(nostr.Filter{Kinds: []int{4339}, Tags: nostr.TagMap{"p": {me.NostrPublicKey()}}})); !slices.Contains(got, replies[0].Event.ID) {
			t.Errorf("the relay did not store the 4339 reply: %v", got)
		}
	})

	errorCases := []struct {
		mutation string
		code     int
		field    string
	}{
		{"bad-sig", 2001, ""},
		{"stale", 2004, ""},
		{"bad-field", 1004, "id"},
		{"unknown-method", 1007, ""},
		{"wrong-to", 1004, "to"},
		{"wrong-from", 2003, ""},
	}
	for _, c := range errorCases {
		t.Run(c.mutation, func(t *testing.T) {
			replies, sent, me := request(t, url, node, jsinterop.ExitOK, "--mutate", c.mutation)
			if len(replies) != 1 {
				t.Fatalf("%d replies", len(replies))
			}
			if !replies[0].Verified {
				t.Fatalf("reply not verified: %v %v", replies[0].Failures, replies[0].Reasons)
			}
			r := decodeResponse(t, replies[0])
			if r.Payload.Error == nil || r.Payload.Error.Code != c.code {
				t.Fatalf("response %s, want error %d", replies[0].Response, c.code)
			}
			if c.field != "" && r.Payload.Error.Data["field"] != c.field {
				t.Errorf("error data %v, want field %s", r.Payload.Error.Data, c.field)
			}
			if c.mutation == "wrong-from" {
				if sent[0].Event.PubKey == me.NostrPublicKey() || replies[0].Event.Tags[0][1] != sent[0].Event.PubKey {
					t.Errorf("wrong-from: the event must be signed by another key, and the reply go to it")
				}
			}
		})
	}

	t.Run("dup", func(t *testing.T) {
		replies, sent, _ := request(t, url, node, jsinterop.ExitOK, "--mutate", "dup")
		if len(sent) != 2 || len(replies) != 2 {
			t.Fatalf("%d sent, %d replies; want 2 and 2", len(sent), len(replies))
		}
		if string(sent[0].Request) != string(sent[1].Request) || sent[0].Event.ID == sent[1].Event.ID {
			t.Errorf("dup must send the same SNAP message in two distinct events")
		}
		first, second := decodeResponse(t, replies[0]), decodeResponse(t, replies[1])
		if replies[0].Attempt != 1 || replies[1].Attempt != 2 {
			t.Errorf("attempts %d, %d", replies[0].Attempt, replies[1].Attempt)
		}
		if first.Payload.Task == nil || first.Payload.Deduplicated {
			t.Errorf("first answer %s", replies[0].Response)
		}
		if second.Payload.Task == nil || !second.Payload.Deduplicated || second.Payload.Task.ID != first.Payload.Task.ID {
			t.Errorf("second answer %s, want the first task with deduplicated:true", replies[1].Response)
		}
	})
}

// TestJSRequestCatchesBadReplies: the client's checks of a reply (the
// signature against the sender's key, the sender it asked, itself as
// recipient, type response, the timestamp window) fail exactly where a
// responder misbehaves, and replies the SDK could never see time out.
func TestJSRequestCatchesBadReplies(t *testing.T) {
	url := jsinterop.StartRelay(t)
	cases := []struct {
		mode     string
		exit     int
		failures []string
	}{
		{"unsigned", jsinterop.ExitFail, []string{"sig"}},
		{"other-from", jsinterop.ExitFail, []string{"from", "fromBinding"}},
		{"stale-response", jsinterop.ExitFail, []string{"timestamp"}},
		{"wrong-to", jsinterop.ExitFail, []string{"to"}},
		{"event-type", jsinterop.ExitFail, []string{"type"}},
		{"wrong-e", jsinterop.ExitTimeout, nil},
		{"silent", jsinterop.ExitTimeout, nil},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			node := startResponder(t, url, c.mode)
			replies, sent, _ := request(t, url, node, c.exit, "--timeout-ms", "2000")
			if len(sent) != 1 {
				t.Fatalf("%d sent lines", len(sent))
			}
			if c.failures == nil {
				if len(replies) != 0 {
					t.Errorf("%d replies, want none", len(replies))
				}
				if node.count() != 1 {
					t.Errorf("the responder saw %d requests, want 1", node.count())
				}
				return
			}
			if len(replies) != 1 || replies[0].Verified {
				t.Fatalf("replies %+v, want one unverified", replies)
			}
			if !slices.Equal(replies[0].Failures, c.failures) {
				t.Errorf("failures %v, want %v (reasons %v)", replies[0].Failures, c.failures, replies[0].Reasons)
			}
		})
	}

	t.Run("linger reports a second reply", func(t *testing.T) {
		node := startResponder(t, url, "twice")
		replies, _, _ := request(t, url, node, jsinterop.ExitOK, "--linger-ms", "1500")
		if len(replies) != 2 || replies[0].Extra || !replies[1].Extra || !replies[1].Verified {
			t.Errorf("replies %+v, want a verified reply and a verified extra one", replies)
		}
	})
}

// TestJSRequestRelays: an unreachable relay among several is skipped;
// none reachable is exit 4.
func TestJSRequestRelays(t *testing.T) {
	url := jsinterop.StartRelay(t)
	node := startResponder(t, url, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "ws://" + l.Addr().String()
	l.Close()

	replies, sent, _ := request(t, url, node, jsinterop.ExitOK, "--relay", dead)
	if len(replies) != 1 || !replies[0].Verified || len(sent[0].Published) != 1 || !sent[0].Published[0].OK {
		t.Errorf("with a dead relay besides: replies %+v sent %+v", replies, sent)
	}
	out, code := jsinterop.Run(t, testCtx(t, time.Minute), "request", "--relay", dead, "--to-pubkey", node.key.NostrPublicKey())
	if code != jsinterop.ExitRelay {
		t.Errorf("only a dead relay: exit %d, want %d: %s", code, jsinterop.ExitRelay, out)
	}
}
