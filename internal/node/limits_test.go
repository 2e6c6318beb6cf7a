package node_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// rateLimited reports whether p is a 5002 answer of the given scope whose
// data has the SNAP error catalogue's fields: the limit, its window (of a
// rate) and when to come back.
func rateLimited(p map[string]any, scope string) bool {
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	after, _ := d["retryAfter"].(float64)
	limit, _ := d["limit"].(float64)
	window, _ := d["window"].(string)
	ok := errCode(p) == int(snap.CodeRateLimitExceeded) && d["scope"] == scope && after >= 1 && limit >= 1
	if scope == "node" || scope == "newcomers" {
		// The stream slots' limit is a count of open streams, not a
		// rate: it has no window.
		return ok
	}
	return ok && window != ""
}

// The per-identity limit holds over every transport: an identity that
// spent its burst over HTTP is refused over Nostr too, with 5002 and
// retryAfter, while another identity is still served.
func TestIdentityLimitAcrossTransports(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.IdentityRate, c.IdentityBurst = 0.001, 3
		c.NostrKeyRate = 0
	})
	aliceKey, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	alice := newHTTPClientWith(t, aliceKey)
	endpoint := n.HTTPURL() + "/snap"
	unknown := map[string]any{"taskId": "no-such-task"}
	for i := range 3 {
		if p := httpCall(t, alice.Send, endpoint, n, "tasks/get", unknown); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d within the burst: %v", i+1, p)
		}
	}
	if p := httpCall(t, alice.Send, endpoint, n, "tasks/get", unknown); !rateLimited(p, "identity") {
		t.Errorf("over the burst over HTTP: %v", p)
	}
	overNostr := newRequesterWith(t, n.RelayURLs(), aliceKey)
	if p := overNostr.call(t, n, "tasks/get", unknown, false); !rateLimited(p, "identity") {
		t.Errorf("the same identity over Nostr: %v", p)
	}
	bob := newRequester(t, n.RelayURLs())
	if p := bob.call(t, n, "tasks/get", unknown, false); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("another identity: %v", p)
	}
}

// The per-Nostr-key limit refuses a key's events past its burst before
// they are decrypted; the same identity over HTTP is not a Nostr key and
// is served.
func TestNostrKeyLimit(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.IdentityRate = 0
		c.NostrKeyRate, c.NostrKeyBurst = 0.001, 2
	})
	alice := newRequester(t, n.RelayURLs())
	unknown := map[string]any{"taskId": "no-such-task"}
	for i := range 2 {
		if p := alice.call(t, n, "tasks/get", unknown, false); errCode(p) != int(snap.CodeTaskNotFound) {
			t.Fatalf("request %d within the burst: %v", i+1, p)
		}
	}
	if p := alice.call(t, n, "tasks/get", unknown, false); !rateLimited(p, "key") {
		t.Errorf("over the burst: %v", p)
	}
	overHTTP := newHTTPClientWith(t, alice.key)
	if p := httpCall(t, overHTTP.Send, n.HTTPURL()+"/snap", n, "tasks/get", unknown); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("the same identity over HTTP: %v", p)
	}
}

// The HTTP transport's connection caps are the node's settings: 2,000 idle
// connections, from the peer's own address and from others, leave the
// node serving /healthz and signed requests, holding no more connections
// than its caps.
func TestHTTPConnectionCaps(t *testing.T) {
	const total, perPeer, flood = 32, 8, 2000
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPMaxConns, c.HTTPMaxConnsPerPeer = total, perPeer
	})
	hostport := strings.TrimPrefix(n.HTTPURL(), "http://")
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range flood {
		src := "127.0.0.1"
		if i%2 == 1 {
			src = fmt.Sprintf("127.0.2.%d", 1+i%50)
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", hostport)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(n.HTTPURL() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz under %d idle connections: %v", flood, err)
	}
	var h snaphttp.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || h.Connections > total {
		t.Errorf("/healthz: %d %+v; want ok with at most %d connections", resp.StatusCode, h, total)
	}
	peer := newHTTPClientWith(t, mustGenerate(t))
	if p := httpCall(t, peer.Send, n.HTTPURL()+"/snap", n, "tasks/get", map[string]any{"taskId": "no-such-task"}); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("a signed request under the flood: %v", p)
	}
	// The flood holds no more than the total: the rest are closed, as the
	// node accepts them (in no order the dialer can know); without the
	// caps all 2,000 stay open.
	held := nettest.HeldOpen(conns, total)
	if held > total {
		t.Errorf("the node still holds %d of %d idle connections; want at most %d", held, flood, total)
	}
}

// The bodies being read are bounded by http_body_memory: while a slow peer
// holds it with a body it sends slowly, a POST gets 429 with Retry-After
// before its body is read; once the slow body ends, signed requests are
// served again.
func TestHTTPBodyMemory(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPMaxBody, c.HTTPBodyMemory = 64<<10, 64<<10
		c.HTTPRate = 0 // the probes below are many
	})
	slow, err := net.Dial("tcp", strings.TrimPrefix(n.HTTPURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"a\":\"", 60<<10)

	// The slow body is read in the background: retry until its
	// reservation shows.
	client := &http.Client{Timeout: 5 * time.Second}
	probe := `{"probe":"` + strings.Repeat("p", 8<<10) + `"}` // more than the 4 KiB left
	var status int
	var retry, body string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		resp, err := client.Post(n.HTTPURL()+"/snap", "application/json", strings.NewReader(probe))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, retry, body = resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
		if status == http.StatusTooManyRequests {
			break
		}
	}
	if status != http.StatusTooManyRequests || retry != "1" || !strings.Contains(body, `"code":5003`) {
		t.Fatalf("a POST while the bodies' memory is held: %d Retry-After %q %s", status, retry, body)
	}
	fmt.Fprint(slow, strings.Repeat("a", 60<<10-7)+`"}`)
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(slow), nil); err != nil || resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow body: %v %v", resp, err)
	}
	peer := newHTTPClientWith(t, mustGenerate(t))
	if p := httpCall(t, peer.Send, n.HTTPURL()+"/snap", n, "tasks/get", map[string]any{"taskId": "no-such-task"}); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("a signed request once the memory is free: %v", p)
	}
}

func mustGenerate(t testing.TB) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// max_live_tasks_per_requester bounds a requester's live tasks in the
// node's database: past it a new task is 5002 {scope: "requester"} naming
// the limit, another requester is still served, and a task that ends
// gives its place back. Before, only a memory node bounded them, at a
// fixed 1,000.
func TestLiveTasksPerRequesterInDatabase(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.MaxLiveTasksPerRequester = 2 })
	alice, bob := newRequester(t, n.RelayURLs()), newRequester(t, n.RelayURLs())
	send := func(r *requester) func(payload any) map[string]any {
		return func(payload any) map[string]any { return r.call(t, n, "message/send", payload, false) }
	}
	first := heldTask(t, send(alice), "one.txt")
	heldTask(t, send(alice), "two.txt")
	p := alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/one.txt"}), false)
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	if errCode(p) != int(snap.CodeRateLimitExceeded) || d["scope"] != "requester" || d["limit"] != float64(2) {
		t.Fatalf("alice's 3rd live task: %v; want 5002 {scope: requester, limit: 2}", p)
	}
	heldTask(t, send(bob), "bob.txt")
	if p := alice.call(t, n, "tasks/cancel", map[string]any{"taskId": first.ID}, false); taskOf(t, p).Status.State != "canceled" {
		t.Fatalf("cancel: %v", p)
	}
	heldTask(t, send(alice), "three.txt")
}
