package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// answer is one reply a test agent makes to a request: a response signed
// by key (the agent's unless set), addressed to to ("-" for no one, ""
// for the requester), with payload.
type answer struct {
	key     *identity.Key
	to      string
	payload string
}

func (a answer) build(t *testing.T, agent *identity.Key, req *snap.Message) []byte {
	t.Helper()
	k := a.key
	if k == nil {
		k = agent
	}
	to := a.to
	switch to {
	case "":
		to = req.From
	case "-":
		to = ""
	}
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: addr(k), To: to, Type: snap.TypeResponse,
		Method: req.Method, Payload: []byte(a.payload), Timestamp: time.Now().Unix()}
	if err := m.Sign(k); err != nil {
		t.Fatal(err)
	}
	return raw(t, m)
}

// The checks of an answer are the same over Nostr and HTTP, save one: over
// Nostr an error response addressed to no one (how an agent refuses a
// request it could not take: rate limited, queue full) is taken, its event
// naming the request; over HTTP, where refusals are HTTP statuses, it is
// refused like any other answer not addressed to the requester. Over Nostr
// an answer that fails is skipped and the next, good one returned; over
// HTTP the exchange fails with ErrInvalidResponse.
func TestOneCheckForEveryTransport(t *testing.T) {
	const good = `{"task":{"id":"good"}}`
	cases := []struct {
		name        string
		a           answer
		nostr, http bool // taken over Nostr, over HTTP
	}{
		{"addressed to the requester", answer{payload: `{"task":{"id":"t"}}`}, true, true},
		{"a result addressed to no one", answer{to: "-", payload: `{"task":{"id":"t"}}`}, false, false},
		{"a refusal addressed to no one", answer{to: "-", payload: `{"error":{"code":5003,"message":"busy"}}`}, true, false},
		{"addressed to someone else", answer{to: addr(otherKey), payload: `{"task":{"id":"t"}}`}, false, false},
		{"a refusal to someone else", answer{to: addr(otherKey), payload: `{"error":{"code":5003,"message":"busy"}}`}, false, false},
		{"from another agent", answer{key: otherKey, payload: `{"task":{"id":"t"}}`}, false, false},
	}
	agent := nostrAgent(t)
	for _, tc := range cases {
		t.Run(tc.name+"/nostr", func(t *testing.T) {
			agent.answers <- func(req *snap.Message) [][]byte {
				return [][]byte{tc.a.build(t, agent.key, req), answer{payload: good}.build(t, agent.key, req)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := agent.transport.Send(ctx, "tasks/get", []byte(`{"taskId":"t"}`))
			if err != nil {
				t.Fatal(err)
			}
			if took := string(resp.Payload) != good; took != tc.nostr {
				t.Errorf("answer taken: %v, want %v (got %s)", took, tc.nostr, resp.Payload)
			}
		})
		t.Run(tc.name+"/http", func(t *testing.T) {
			url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(tc.a.build(t, serverKey, req))
			})
			c := client.NewHTTP(client.HTTPConfig{Key: clientKey})
			_, err := c.To(url, addr(serverKey)).Send(context.Background(), "tasks/get", []byte(`{"taskId":"t"}`))
			if took := err == nil; took != tc.http || (!took && !errors.Is(err, client.ErrInvalidResponse)) {
				t.Errorf("answer taken: %v, want %v (%v)", took, tc.http, err)
			}
		})
	}
}

// testAgent answers the requests sent to its Nostr key through an
// embedded relay with what the function it is given next returns.
type testAgent struct {
	key       *identity.Key
	answers   chan func(req *snap.Message) [][]byte
	transport client.Transport
	pool      *relay.Pool     // the relay's pool the agent and its requesters share
	verifier  *relay.Verifier // the pool's, when the test gave one
}

func nostrAgent(t *testing.T) *testAgent { return nostrAgentWith(t, nil) }

// nostrAgentWith is nostrAgent with the Verifier v, when not nil, shared
// by the pool, the agent and its requester: the agent signs its replies
// through v, so that their events cost v no check.
func nostrAgentWith(t *testing.T, v *relay.Verifier) *testAgent {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	url := relaytest.Serve(t, embedded.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet, Verifier: v})
	pool.Start(ctx)
	a := &testAgent{key: serverKey, answers: make(chan func(*snap.Message) [][]byte, 1), pool: pool, verifier: v}
	sub, err := pool.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindEphemeral}, Tags: nostr.TagMap{"p": {a.key.NostrPublicKey()}}})
	if err != nil {
		t.Fatal(err)
	}
	select { // the agent listens before it is asked
	case <-sub.EOSE():
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's subscription got no EOSE")
	}
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		a.serve(ctx, t, pool, sub)
	}()
	t.Cleanup(func() {
		cancel()
		<-replied
		sub.Close()
		pool.Close()
	})
	a.transport = client.NewNostr(client.NostrConfig{Key: clientKey, Relays: pool, Verifier: v, Logger: quiet}).
		To(client.Target{Address: addr(a.key), PubKey: a.key.NostrPublicKey()}, false)
	return a
}

// serve opens each request and publishes the replies of the next answer
// function, in order, each tagged with the request and the requester.
func (a *testAgent) serve(ctx context.Context, t *testing.T, pool *relay.Pool, sub *relay.Subscription) {
	sealer := snapnostr.NewSealer(a.key, 4)
	for {
		var ev *nostr.Event
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.Events():
			if !ok { // ended with ctx, which the cleanup cancels
				return
			}
			ev = e
		}
		plain, err := sealer.Open(ev.PubKey, ev.Content)
		if err != nil {
			t.Errorf("agent: %v", err)
			return
		}
		req, err := snap.Parse(plain)
		if err != nil {
			t.Errorf("agent: %v", err)
			return
		}
		var answer func(*snap.Message) [][]byte
		select {
		case <-ctx.Done():
			return
		case answer = <-a.answers:
		}
		for _, r := range answer(req) {
			content, err := sealer.Seal(ev.PubKey, r)
			if err != nil {
				t.Errorf("agent: %v", err)
				return
			}
			reply := nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Content: content,
				Tags: nostr.Tags{{"p", ev.PubKey}, {"e", ev.ID}}}
			if err := a.verifier.Sign(a.key, &reply); err != nil {
				t.Errorf("agent: %v", err)
				return
			}
			if _, err := pool.Publish(ctx, reply); err != nil && !strings.Contains(err.Error(), "context canceled") {
				t.Errorf("agent: publish: %v", err)
				return
			}
		}
	}
}

// An agent whose clock is behind the requester's dates its reply before
// the request; inside the timestamp window both ends accept, so the
// requester must listen back as far as the window reaches, or the relay
// holds the reply back from its subscription and the request times out.
func TestReplyFromAnAgentWhoseClockIsBehind(t *testing.T) {
	agent := nostrAgent(t)
	ahead := func() time.Time { return time.Now().Add(40 * time.Second) }
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: agent.pool, Logger: slog.New(slog.DiscardHandler), Now: ahead}).
		To(client.Target{Address: addr(agent.key), PubKey: agent.key.NostrPublicKey()}, false)
	const good = `{"task":{"id":"good"}}`
	agent.answers <- func(req *snap.Message) [][]byte { return [][]byte{answer{payload: good}.build(t, agent.key, req)} }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Send(ctx, "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil {
		t.Fatalf("a reply dated 40 s before the request: %v", err)
	}
	if string(resp.Payload) != good {
		t.Errorf("payload %s", resp.Payload)
	}
}

// A refusal addressed to no one over HTTP (where refusals are HTTP
// statuses) is refused, and the error names the SNAP error it carried,
// cut to 500 bytes: the agent chooses its message (up to the transport's
// message size, megabytes over HTTP), not the size of the requester's
// errors and the log lines that carry them.
func TestRefusedErrorHintCut(t *testing.T) {
	long := strings.Repeat("busy \u00e9t\u00e9 ", 3000) // 36 kB, two-byte runes
	refusal := answer{to: "-", payload: `{"error":{"code":5003,"message":"` + long + `"}}`}
	url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(refusal.build(t, serverKey, req))
	})
	_, err := client.NewHTTP(client.HTTPConfig{Key: clientKey}).To(url, addr(serverKey)).Send(context.Background(), "tasks/get", []byte(`{"taskId":"t"}`))
	if !errors.Is(err, client.ErrInvalidResponse) || !strings.Contains(err.Error(), "it carried error 5003: busy") {
		t.Fatalf("error %.300v; want ErrInvalidResponse naming the error carried", err)
	}
	if n := len(err.Error()); n > 1000 || !utf8.ValidString(err.Error()) {
		t.Errorf("the error is %d bytes (valid UTF-8: %v); want the agent's message cut", n, utf8.ValidString(err.Error()))
	}
}

// A requester over the relays of a Verifier (Relays.Nostr, or a Nostr
// client given the pool's Verifier) checks the agent's answers through
// the Verifier's tables, by the agent's Nostr key P: after
// secp.PromoteAfter answers P holds a table there, and only P, not the
// address's output key Q, so that the agent's events and its answers earn
// one table, not one in the Verifier and another in the requester. The
// agent signs its events through the Verifier, so that no event is
// checked and only the answers count toward P.
func TestNostrAnswersShareTheVerifiersTables(t *testing.T) {
	v := relay.NewVerifier()
	agent := nostrAgentWith(t, v)
	const good = `{"task":{"id":"good"}}`
	for i := range secp.PromoteAfter {
		agent.answers <- func(req *snap.Message) [][]byte { return [][]byte{answer{payload: good}.build(t, agent.key, req)} }
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := agent.transport.Send(ctx, "tasks/get", []byte(`{"taskId":"t"}`))
		cancel()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if string(resp.Payload) != good {
			t.Fatalf("request %d: payload %s", i, resp.Payload)
		}
	}
	if n := v.SignatureChecks(); n != 0 {
		t.Fatalf("the Verifier checked %d events' signatures, want none (all signed through it)", n)
	}
	tables := v.Tables()
	if _, ok := tables.Get(agent.key.InternalKey()); !ok {
		t.Fatalf("the agent's Nostr key holds no table in the Verifier's Tables after %d answers", secp.PromoteAfter)
	}
	if _, ok := tables.Get(agent.key.OutputKey()); ok || tables.Len() != 1 {
		t.Fatalf("the output key holds a table (%v), or %d keys do; want the Nostr key's only", ok, tables.Len())
	}
}
