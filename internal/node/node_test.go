package node_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// startNode starts a node with its embedded relay on a free loopback port
// and a data folder of its own; it stops at the end of the test.
func startNode(t testing.TB, mutate func(*config.Config)) (*node.Node, context.CancelFunc) {
	t.Helper()
	return startNodeOpts(t, mutate)
}

// startNodeWith is startNode with options, for tests that need no stop.
func startNodeWith(t testing.TB, mutate func(*config.Config), opts ...node.Option) *node.Node {
	t.Helper()
	n, _ := startNodeOpts(t, mutate, opts...)
	return n
}

func startNodeOpts(t testing.TB, mutate func(*config.Config), opts ...node.Option) (*node.Node, context.CancelFunc) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = "" // tests that want HTTP ask for a port
	if mutate != nil {
		mutate(&cfg)
	}
	return startConfigured(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
}

// startConfigured starts a node on cfg logging to logger; stop (also run
// at the end of the test, once) stops it and checks it stopped cleanly.
func startConfigured(t testing.TB, cfg config.Config, logger *slog.Logger, opts ...node.Option) (n *node.Node, stop context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, logger, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := n.Wait(); err != nil {
				t.Errorf("node stopped with %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return n, stop
}

// startRefused starts a node on cfg that must refuse to start, and checks
// that its error names each of names; what says what the start should
// have refused, for the failure.
func startRefused(t *testing.T, cfg config.Config, what string, names ...string) {
	t.Helper()
	startRefusedWith(t, cfg, nil, what, names...)
}

// startRefusedWith is startRefused with the node's options.
func startRefusedWith(t *testing.T, cfg config.Config, opts []node.Option, what string, names ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler), opts...)
	if err == nil {
		cancel()
		n.Wait()
		t.Fatalf("a node started %s", what)
	}
	for _, want := range names {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// requester is a client identity with its own pool.
type requester struct {
	key    *identity.Key
	pool   *relay.Pool
	client *client.Nostr
}

func newRequester(t testing.TB, urls []string) *requester {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return newRequesterWith(t, urls, k)
}

// newRequesterWith is newRequester with the requester's key k.
func newRequesterWith(t testing.TB, urls []string, k *identity.Key) *requester {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p.Start(ctx)
	t.Cleanup(func() { cancel(); p.Close() })
	return &requester{key: k, pool: p, client: client.NewNostr(client.NostrConfig{Key: k, Relays: p})}
}

func (r *requester) call(t testing.TB, n *node.Node, method string, payload any, persist bool) map[string]any {
	t.Helper()
	body, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := r.client.Request(ctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
		client.NostrRequest{Method: method, Payload: body, Persist: persist})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func text(s string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "m-" + s, "role": "user", "parts": []any{map[string]any{"text": s}}}}
}

// noAgent fails the test unless v is how a node without an agent answers
// a free-text task: failed at once, the status message naming the flag
// that enables one.
func noAgent(t *testing.T, what string, v taskView) {
	t.Helper()
	if v.Status.State != "failed" || !strings.Contains(v.Status.Message, "--llm-url") {
		t.Fatalf("%s: state %s, message %q; want failed, naming --llm-url (no agent on this node)", what, v.Status.State, v.Status.Message)
	}
}

// heldTask makes, through send (a message/send call returning the
// response's payload), a task that stays live until an operator decides:
// a WRITE_FILE of /sandbox/name, promoted at once, then a DELETE_FILE of
// it, held for confirmation (input_required). It returns the held task.
func heldTask(t *testing.T, send func(payload any) map[string]any, name string) taskView {
	t.Helper()
	path := "/sandbox/" + name
	if w := taskOf(t, send(proposal("WRITE_FILE", map[string]any{"path": path, "content": "held\n"}))); w.Status.State != "completed" {
		t.Fatalf("write %s: %s %q", path, w.Status.State, w.Status.Message)
	}
	d := taskOf(t, send(proposal("DELETE_FILE", map[string]any{"path": path})))
	if d.Status.State != "input_required" || !strings.Contains(d.Status.Message, "confirmation needed") {
		t.Fatalf("delete %s: %s %q; want input_required, confirmation needed", path, d.Status.State, d.Status.Message)
	}
	return d
}

func errCode(p map[string]any) int {
	e, _ := p["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func TestNodeRoundTripsOverEmbeddedRelay(t *testing.T) {
	n, _ := startNode(t, nil)
	alice := newRequester(t, n.RelayURLs())

	// Free text, on a node without an agent: failed at once, saying how
	// to enable one.
	p := alice.call(t, n, "message/send", text("hello"), false)
	task, _ := p["task"].(map[string]any)
	id, _ := task["id"].(string)
	if id == "" || task["contextId"] == nil {
		t.Fatalf("message/send: %v", p)
	}
	noAgent(t, "message/send", taskOf(t, p))
	p = alice.call(t, n, "tasks/get", map[string]any{"taskId": id}, false)
	if v := taskOf(t, p); v.ID != id {
		t.Fatalf("tasks/get: %v", p)
	} else {
		noAgent(t, "tasks/get", v)
	}
	if p := alice.call(t, n, "tasks/cancel", map[string]any{"taskId": id}, false); errCode(p) != 1002 {
		t.Fatalf("tasks/cancel of a failed task: %v, want 1002", p)
	}

	// A task held for the operator stays live: it can be canceled.
	held := heldTask(t, func(payload any) map[string]any { return alice.call(t, n, "message/send", payload, false) }, "round-trip.txt").ID
	p = alice.call(t, n, "tasks/cancel", map[string]any{"taskId": held}, true) // stored kinds too
	if p["task"].(map[string]any)["status"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("tasks/cancel: %v", p)
	}
	p = alice.call(t, n, "tasks/cancel", map[string]any{"taskId": held}, false)
	if errCode(p) != 0 || p["task"].(map[string]any)["status"].(map[string]any)["state"] != "canceled" {
		t.Fatalf("tasks/cancel again (idempotent): %v", p)
	}
	// Another identity cannot see the tasks.
	mallory := newRequester(t, n.RelayURLs())
	for _, id := range []string{id, held} {
		if p := mallory.call(t, n, "tasks/get", map[string]any{"taskId": id}, false); errCode(p) != 1001 {
			t.Fatalf("another identity's tasks/get: %v, want 1001", p)
		}
	}
	if p := alice.call(t, n, "foo/bar", map[string]any{}, false); errCode(p) != 1007 {
		t.Fatalf("unknown method: %v, want 1007", p)
	}
	if p := alice.call(t, n, "message/send", map[string]any{"message": map[string]any{"role": "robot"}}, false); errCode(p) != 1004 {
		t.Fatalf("bad payload: %v, want 1004", p)
	}
}

// The card is on the relay, valid and bound to the node's key.
func TestNodePublishesItsCard(t *testing.T) {
	n, _ := startNode(t, nil)
	r := newRequester(t, n.RelayURLs())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, rejected, err := snapnostr.DiscoverByIdentity(ctx, r.pool, n.Address(), snapnostr.DiscoverConfig{})
	if err != nil || rejected.Count != 0 {
		t.Fatalf("discover: %v, rejected %v", err, rejected)
	}
	if d.PubKey != n.NostrPublicKey() || d.Card.Name != "snapnode" || d.Card.NostrRelays[0] != n.RelayURLs()[0] {
		t.Errorf("card: %+v", d)
	}
	found, _, err := snapnostr.DiscoverBySkill(ctx, r.pool, "tasks", snapnostr.DiscoverConfig{})
	if err != nil || len(found) != 1 || found[0].Card.Identity != n.Address() {
		t.Errorf("discover by skill: %v %v", found, err)
	}
}

// The card says the node streams: message/stream and tasks/resubscribe
// are served on every transport, and capabilities.streaming defaults to
// false, so a peer that reads the card before streaming would not try.
func TestNodeCardDeclaresStreaming(t *testing.T) {
	n, _ := startNode(t, nil)
	r := newRequester(t, n.RelayURLs())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, _, err := snapnostr.DiscoverByIdentity(ctx, r.pool, n.Address(), snapnostr.DiscoverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Card.Capabilities; c == nil || !c.Streaming {
		t.Errorf("card capabilities %+v, want streaming", c)
	}
}

// A changed card is republished and discovery returns the new one; an
// unchanged one is not.
func TestNodeRepublishesChangedCard(t *testing.T) {
	n, _ := startNode(t, nil)
	r := newRequester(t, n.RelayURLs())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := config.Default().Card
	if published, err := n.UpdateCard(ctx, c); err != nil || published {
		t.Fatalf("unchanged card: published=%v err=%v", published, err)
	}
	c.Name = "renamed"
	// Cards are replaceable per second: let the second change.
	time.Sleep(1100 * time.Millisecond)
	if published, err := n.UpdateCard(ctx, c); err != nil || !published {
		t.Fatalf("changed card: published=%v err=%v", published, err)
	}
	d, _, err := snapnostr.DiscoverByIdentity(ctx, r.pool, n.Address(), snapnostr.DiscoverConfig{})
	if err != nil || d.Card.Name != "renamed" {
		t.Fatalf("discovered %v, %v; want the renamed card", d, err)
	}
	c.Name = "" // invalid: a card needs a name
	if _, err := n.UpdateCard(ctx, c); err == nil || n.Card().Name != "renamed" {
		t.Errorf("an invalid card was accepted (%v) or replaced the published one", err)
	}
}

// An accepted task survives a restart: the same requester reads it from
// the restarted node. (The durable replay records behind it are tested in
// tasks/sqlstore, across two stores on one database.)
func TestTasksSurviveRestart(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := func(c *config.Config) { c.DataDir = dataDir }
	n, stop := startNode(t, cfg)
	alice := newRequester(t, n.RelayURLs())
	p := alice.call(t, n, "message/send", text("keep-me"), false)
	id := p["task"].(map[string]any)["id"].(string)
	answered := taskOf(t, p).Status.State
	stop()

	n2, _ := startNode(t, cfg)
	// The same identity, through a pool on the restarted node's relay.
	alice2 := newRequester(t, n2.RelayURLs())
	alice2.key = alice.key
	alice2.client = client.NewNostr(client.NostrConfig{Key: alice.key, Relays: alice2.pool})
	got := alice2.call(t, n2, "tasks/get", map[string]any{"taskId": id}, false)
	task, _ := got["task"].(map[string]any)
	if task == nil || task["id"] != id || len(task["history"].([]any)) != 1 || taskOf(t, got).Status.State != answered {
		t.Fatalf("after restart, tasks/get: %v; want the state answered, %s", got, answered)
	}
}

// TestCardRelays: the card advertises the relays the node uses, or those
// [card] nostr_relays names: an embedded relay on an address other
// machines reach over ws://, which the card may not advertise, is
// advertised at the URL of the TLS proxy in front of it, and without one
// the node does not start and says which setting to give.
func TestCardRelays(t *testing.T) {
	n, _ := startNode(t, nil)
	if got := n.Card().NostrRelays; !slices.Equal(got, n.RelayURLs()) {
		t.Errorf("by default the card advertises %v, want the relays used %v", got, n.RelayURLs())
	}

	ip := nettest.MachineIPv4(t)
	proxied := []string{"wss://relay.example.com"}
	n, _ = startNode(t, func(c *config.Config) { c.RelayListen, c.Card.NostrRelays = net.JoinHostPort(ip, "0"), proxied })
	if got := n.Card().NostrRelays; !slices.Equal(got, proxied) {
		t.Errorf("the card advertises %v, want %v", got, proxied)
	}
	if got := n.RelayURLs(); len(got) != 1 || !strings.HasPrefix(got[0], "ws://"+ip+":") {
		t.Errorf("the node uses %v, want its relay at %s", got, ip)
	}

	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), net.JoinHostPort(ip, "0"), ""
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "set [card] nostr_relays (--card-relay)") || !strings.Contains(err.Error(), "nostrRelays[0]") {
		t.Fatalf("a relay on %s with no card relays: %v, want a refusal naming the setting", ip, err)
	}
}

// TestCardAdvertises: the card lists the skills the node has (file
// actions always; the agent only when configured, see TestNoAgentFailsAtOnce)
// and an endpoint for the HTTP transport only where a peer can reach it.
func TestCardAdvertises(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listen    string
		public    string
		endpoints []snap.Endpoint
	}{
		{"loopback", "127.0.0.1:0", "", nil},
		{"behind a TLS proxy", "127.0.0.1:0", "https://node.example.com/agent/", []snap.Endpoint{
			{Protocol: "http", URL: "https://node.example.com/agent/snap"}, {Protocol: "wss", URL: "wss://node.example.com/agent/snap"}}},
		{"plain http", "127.0.0.1:0", "http://203.0.113.5:7448", []snap.Endpoint{{Protocol: "http", URL: "http://203.0.113.5:7448/snap"}}},
		{"no HTTP", "", "https://node.example.com", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _ := startNode(t, func(c *config.Config) { c.HTTPListen, c.HTTPPublicURL = tc.listen, tc.public })
			card := n.Card()
			if !slices.Equal(card.Endpoints, tc.endpoints) {
				t.Errorf("endpoints %v, want %v", card.Endpoints, tc.endpoints)
			}
			var ids []string
			for _, s := range card.Skills {
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, []string{"tasks", "file-actions"}) {
				t.Errorf("skills %v, want tasks and file-actions", ids)
			}
		})
	}
	if err := (func() error { c := config.Default(); c.HTTPPublicURL = "ftp://x"; return c.Validate() })(); err == nil || !strings.Contains(err.Error(), "http_public_url") {
		t.Errorf("an ftp public URL: %v", err)
	}
}
