package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A drive-by page is a web page in the operator's browser, on the node's
// machine, that talks to the node on loopback. These helpers send what a
// browser sends for it: an Origin, the Sec-Fetch-* headers, and a POST
// of Content-Type text/plain, which needs no CORS preflight.

// page is where a request seems to come from: a browser page's origin
// and the Host its URL names ("" keeps the address dialled).
type page struct {
	origin, host, site string // site: Sec-Fetch-Site
}

// foreignPage is a page of another site posting to the node's address.
var foreignPage = page{origin: "https://evil.example", site: "cross-site"}

// pageMessage is a message/send signed with a key of the page's own,
// which any page can make.
func pageMessage(t *testing.T, n *node.Node) []byte {
	t.Helper()
	return pageMessageTo(t, n.Address())
}

// pageMessageTo is pageMessage to the node of address to.
func pageMessageTo(t *testing.T, to string) []byte {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(text("page-" + snap.NewID()[:8]))
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet), To: to,
		Type: snap.TypeRequest, Method: "message/send", Payload: payload, Timestamp: time.Now().Unix()}
	if err := m.Sign(k); err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// browserPost posts body to url as fetch(url, {method: "POST", body})
// does from p: a simple request, text/plain.
func browserPost(t *testing.T, url string, p page, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	setPage(req.Header, p)
	req.Header.Set("Sec-Fetch-Mode", "cors")
	req.Header.Set("Sec-Fetch-Dest", "empty")
	if p.host != "" {
		req.Host = p.host
	}
	return do(t, req)
}

func setPage(h http.Header, p page) {
	if p.origin != "" {
		h.Set("Origin", p.origin)
	}
	if p.site != "" {
		h.Set("Sec-Fetch-Site", p.site)
	}
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// browserWebSocket opens a WebSocket to url as new WebSocket(url) does
// from p, and returns the status of the upgrade's answer.
func browserWebSocket(t *testing.T, url string, p page) int {
	t.Helper()
	h := http.Header{}
	setPage(h, p)
	h.Set("Sec-Fetch-Mode", "websocket")
	h.Set("Sec-Fetch-Dest", "empty")
	if p.host != "" {
		h.Set("Host", p.host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, url, h)
	if c != nil {
		c.Close()
	}
	if resp == nil {
		t.Fatalf("WebSocket %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// taskCount is the number of tasks the node holds.
func taskCount(t *testing.T, n *node.Node) int {
	t.Helper()
	ts, err := n.Tasks.List(context.Background(), tasks.Filter{Brief: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(ts)
}

// refusalNames checks that a refusal's body has SNAP's error shape, with
// the status under data, and that its message names the setting.
func refusalNames(t *testing.T, what string, body []byte, status int, setting string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == 0 {
		t.Fatalf("%s: body %q is not an error of SNAP's shape", what, body)
	}
	if e.Error.Data["status"] != float64(status) || !strings.Contains(e.Error.Message, setting) {
		t.Errorf("%s: %q: want data.status %d and a message naming %s", what, body, status, setting)
	}
}

// A page of another site cannot make a node with its default settings
// take a message: it posts a signed message/send as text/plain (no
// preflight), which gets 403 and makes no task, and it cannot open a
// WebSocket to /snap or to the embedded relay. A peer that sends no
// Origin (SDK peers, curl, snapnode's client) is served as before.
func TestDriveByPageRefused(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	snapURL := n.HTTPURL() + "/snap"

	status, body := browserPost(t, snapURL, foreignPage, pageMessage(t, n))
	if status != http.StatusForbidden {
		t.Errorf("a cross-site page's POST /snap: %d %s; want 403", status, body)
	} else {
		refusalNames(t, "a cross-site page's POST", body, http.StatusForbidden, "http_allowed_origins")
	}
	sse := func(p page) int {
		req, _ := http.NewRequest(http.MethodPost, snapURL, bytes.NewReader(pageMessage(t, n)))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Accept", "text/event-stream")
		setPage(req.Header, p)
		s, _ := do(t, req)
		return s
	}
	if s := sse(foreignPage); s != http.StatusForbidden {
		t.Errorf("a cross-site page's POST /snap for SSE: %d; want 403", s)
	}
	// An old browser sends no Sec-Fetch-Site: the Origin alone refuses.
	if s, b := browserPost(t, snapURL, page{origin: "http://localhost:3000"}, pageMessage(t, n)); s != http.StatusForbidden {
		t.Errorf("a POST from another loopback origin without Sec-Fetch-Site: %d %s; want 403", s, b)
	}
	if c := taskCount(t, n); c != 0 {
		t.Fatalf("the pages' messages made %d tasks", c)
	}
	if s := browserWebSocket(t, strings.Replace(snapURL, "http", "ws", 1), foreignPage); s != http.StatusForbidden {
		t.Errorf("a cross-site page's WebSocket to /snap: %d; want 403", s)
	}
	if s := browserWebSocket(t, n.RelayURLs()[0], foreignPage); s != http.StatusForbidden {
		t.Errorf("a cross-site page's WebSocket to the loopback relay: %d; want 403", s)
	}

	// What is no browser page is served.
	if s, b := browserPost(t, snapURL, page{}, pageMessage(t, n)); s != http.StatusOK {
		t.Errorf("a POST without Origin: %d %s; want 200", s, b)
	}
	if s := sse(page{}); s != http.StatusOK {
		t.Errorf("an SSE POST without Origin: %d; want 200", s)
	}
	if c := taskCount(t, n); c != 2 {
		t.Errorf("%d tasks; want the 2 posted without Origin", c)
	}
	for _, p := range []page{{}, {origin: "http://localhost:5173", site: "same-site"}, {origin: "http://127.0.0.1:8080", site: "same-site"}, {origin: "http://[::1]:80"}} {
		if s := browserWebSocket(t, n.RelayURLs()[0], p); s != http.StatusSwitchingProtocols {
			t.Errorf("a WebSocket to the loopback relay from %q: %d; want 101", p.origin, s)
		}
	}
	// A page of the node's own origin is served.
	same := page{origin: n.HTTPURL(), site: "same-origin"}
	if s, b := browserPost(t, snapURL, same, pageMessage(t, n)); s != http.StatusOK {
		t.Errorf("a POST from the endpoint's own origin: %d %s; want 200", s, b)
	}
	if s := browserWebSocket(t, strings.Replace(snapURL, "http", "ws", 1), same); s != http.StatusSwitchingProtocols {
		t.Errorf("a WebSocket to /snap from the endpoint's own origin: %d; want 101", s)
	}
}

// DNS rebinding: a page of evil.example whose name then resolves to
// 127.0.0.1 is of the same origin as what it reaches there, so that its
// requests pass an Origin check and it may read the answers. The node
// refuses a Host that names neither a loopback name nor an address, nor
// its own names (the listen address, http_public_url, the card's
// endpoints, http_allowed_hosts), and the loopback relay refuses the
// page's origin.
func TestDNSRebindingRefused(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	port := n.HTTPURL()[strings.LastIndex(n.HTTPURL(), ":")+1:]
	rebound := page{origin: "http://evil.example:" + port, host: "evil.example:" + port, site: "same-origin"}

	status, body := browserPost(t, n.HTTPURL()+"/snap", rebound, pageMessage(t, n))
	if status != http.StatusMisdirectedRequest {
		t.Errorf("a rebound page's POST /snap: %d %s; want 421", status, body)
	} else {
		refusalNames(t, "a rebound page's POST", body, http.StatusMisdirectedRequest, "http_allowed_hosts")
	}
	if c := taskCount(t, n); c != 0 {
		t.Fatalf("the rebound page's message made %d tasks", c)
	}
	for _, path := range []string{"/healthz", "/metrics", "/console/", "/.well-known/snap-agent.json"} {
		req, _ := http.NewRequest(http.MethodGet, n.HTTPURL()+path, nil)
		req.Host = rebound.host
		setPage(req.Header, page{site: "same-origin"})
		if s, b := do(t, req); s != http.StatusMisdirectedRequest {
			t.Errorf("a rebound page's GET %s: %d %.100s; want 421", path, s, b)
		}
	}
	if s := browserWebSocket(t, strings.Replace(n.HTTPURL(), "http", "ws", 1)+"/snap", rebound); s != http.StatusMisdirectedRequest {
		t.Errorf("a rebound page's WebSocket to /snap: %d; want 421", s)
	}
	relayPort := n.RelayURLs()[0][strings.LastIndex(n.RelayURLs()[0], ":")+1:]
	relayRebound := page{origin: "http://evil.example:" + relayPort, host: "evil.example:" + relayPort, site: "same-origin"}
	if s := browserWebSocket(t, n.RelayURLs()[0], relayRebound); s != http.StatusForbidden {
		t.Errorf("a rebound page's WebSocket to the loopback relay: %d; want 403", s)
	}

	// The names of the machine are served.
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "app.localhost:" + port, "192.0.2.7:" + port, ""} {
		req, _ := http.NewRequest(http.MethodGet, n.HTTPURL()+"/healthz", nil)
		req.Host = host
		if s, b := do(t, req); s != http.StatusOK {
			t.Errorf("GET /healthz with Host %q: %d %s; want 200", host, s, b)
		}
	}
}

// The settings let the operator's own pages and names in:
// http_allowed_origins for POST /snap and the WebSocket alike,
// http_public_url's host and http_allowed_hosts as names, and
// relay_allowed_origins for the relay.
func TestDriveBySettings(t *testing.T) {
	app := page{origin: "https://app.example", site: "cross-site"}
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPPublicURL = "https://node.example.com"
		c.HTTPAllowedOrigins = []string{"https://app.example"}
		c.HTTPAllowedHosts = []string{"snap.internal"}
		c.RelayAllowedOrigins = []string{"https://app.example"}
	})
	snapURL := n.HTTPURL() + "/snap"
	if s, b := browserPost(t, snapURL, app, pageMessage(t, n)); s != http.StatusOK {
		t.Errorf("a POST from an allowed origin: %d %s; want 200", s, b)
	}
	if s := browserWebSocket(t, strings.Replace(snapURL, "http", "ws", 1), app); s != http.StatusSwitchingProtocols {
		t.Errorf("a WebSocket to /snap from an allowed origin: %d; want 101", s)
	}
	if s := browserWebSocket(t, n.RelayURLs()[0], app); s != http.StatusSwitchingProtocols {
		t.Errorf("a WebSocket to the relay from an allowed origin: %d; want 101", s)
	}
	if s := browserWebSocket(t, n.RelayURLs()[0], foreignPage); s != http.StatusForbidden {
		t.Errorf("a WebSocket to the relay from another origin: %d; want 403", s)
	}
	hosts := map[string]int{"node.example.com": 200, "snap.internal:7448": 200, "evil.example": 421}
	if name, err := os.Hostname(); err == nil && name != "" {
		// The machine's own name, and its mDNS form: a node on a LAN is
		// reached by them.
		hosts[name], hosts[strings.ToUpper(name)+".local:7448"] = 200, 200
	}
	for host, want := range hosts {
		req, _ := http.NewRequest(http.MethodGet, n.HTTPURL()+"/healthz", nil)
		req.Host = host
		if s, _ := do(t, req); s != want {
			t.Errorf("GET /healthz with Host %q: %d; want %d", host, s, want)
		}
	}

	open, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPAllowedOrigins, c.HTTPAllowedHosts, c.RelayAllowedOrigins = []string{"*"}, []string{"*"}, []string{"*"}
	})
	if s, b := browserPost(t, open.HTTPURL()+"/snap", page{origin: "https://evil.example", host: "evil.example", site: "cross-site"}, pageMessage(t, open)); s != http.StatusOK {
		t.Errorf(`a POST from any origin to any host, all allowed ("*"): %d %s; want 200`, s, b)
	}
	if s := browserWebSocket(t, open.RelayURLs()[0], foreignPage); s != http.StatusSwitchingProtocols {
		t.Errorf(`a WebSocket to the relay, every origin allowed ("*"): %d; want 101`, s)
	}
}

// A node listening on an IPv6 address, or advertising one, starts and
// answers to it: the addresses are names it answers to as any address is.
func TestIPv6ListenAnswered(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "[::1]:0"
		c.HTTPPublicURL = "http://[fe80::1%25eth0]:7448"
	})
	port := n.HTTPURL()[strings.LastIndex(n.HTTPURL(), ":")+1:]
	for _, host := range []string{"[::1]:" + port, "[::1]", "[fe80::1%25eth0]:7448", "LOCALHOST.:" + port, "192.0.2.7.:" + port} {
		req, _ := http.NewRequest(http.MethodGet, n.HTTPURL()+"/healthz", nil)
		req.Host = host
		if s, b := do(t, req); s != http.StatusOK {
			t.Errorf("GET /healthz with Host %q: %d %s; want 200", host, s, b)
		}
	}
}

// A reload puts the names of the card's new endpoints and of
// http_allowed_hosts in force: the card is republished with an endpoint
// at a new public name (an operator moving behind a proxy), and the
// proxy's requests to that name are answered, not 421 until a restart.
func TestReloadedHostsAnswered(t *testing.T) {
	var cfg config.Config
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		cfg = *c
	})
	status := func(host string) int {
		req, _ := http.NewRequest(http.MethodGet, n.HTTPURL()+"/healthz", nil)
		req.Host = host
		s, _ := do(t, req)
		return s
	}
	for _, host := range []string{"snap.example.org", "snap.internal"} {
		if s := status(host); s != http.StatusMisdirectedRequest {
			t.Fatalf("GET /healthz with Host %q before the reload: %d; want 421", host, s)
		}
	}
	cfg.Card.Endpoints = append(cfg.Card.Endpoints[:0:0], struct {
		Protocol string `toml:"protocol"`
		URL      string `toml:"url"`
	}{Protocol: "http", URL: "https://snap.example.org/snap"})
	cfg.HTTPAllowedHosts = []string{"snap.internal"}
	restart, err := n.Reload(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(restart) > 0 {
		t.Errorf("settings needing a restart: %q; want none", restart)
	}
	for _, host := range []string{"snap.example.org", "snap.internal:7448", "evil.example"} {
		want := http.StatusOK
		if host == "evil.example" {
			want = http.StatusMisdirectedRequest
		}
		if s := status(host); s != want {
			t.Errorf("GET /healthz with Host %q after the reload: %d; want %d", host, s, want)
		}
	}
}

// SIGHUP puts http_allowed_origins and relay_allowed_origins in force,
// as it does http_allowed_hosts, without a restart: a page of an origin
// added to the settings file is refused before and served after, on POST
// /snap, the WebSocket to /snap and the embedded relay; one removed is
// refused again; the change is logged; a list that does not parse is
// refused, the one in force kept. Against the real binary.
func TestDriveByOriginsReloadedOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "snapnode.toml")
	setOrigins := func(list string) {
		t.Helper()
		body := "http_allowed_origins = " + list + "\nrelay_allowed_origins = " + list + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setOrigins(`["https://old.example"]`)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() }) // after the node ended (cleanups run last first)
	var all testutil.LockedBuffer
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			all.Write([]byte(sc.Text() + "\n"))
			select {
			case lines <- sc.Text():
			default: // nobody waits for it; kept in all
			}
		}
		io.Copy(io.Discard, pr)
	}()
	d := testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: filepath.Join(dir, "data"),
		Args: []string{"--config", conf, "--http-listen", "127.0.0.1:0", "--log-level", "info"},
		Env:  []string{identity.EnvKey + "="}, Stderr: pw})

	// hup sends SIGHUP and returns the lines the node logged up to the
	// one that says how the reload ended, which must contain want.
	hup := func(want string) string {
		t.Helper()
		for len(lines) > 0 { // what came before is not this reload's
			<-lines
		}
		if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var logged strings.Builder
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l := <-lines:
				logged.WriteString(l + "\n")
				if strings.Contains(l, "settings reloaded") || strings.Contains(l, "settings not reloaded") {
					if !strings.Contains(l, want) {
						t.Fatalf("after SIGHUP: %q, want a line with %q", l, want)
					}
					return logged.String()
				}
			case <-timeout:
				t.Fatalf("no reload logged after SIGHUP:\n%s", all.String())
			}
		}
	}
	// served reports, for a page of origin, the statuses of a POST /snap,
	// a WebSocket to /snap and one to the relay.
	served := func(origin string) [3]int {
		p := page{origin: origin, site: "cross-site"}
		post, _ := browserPost(t, d.HTTPURL, p, pageMessageTo(t, d.Address))
		return [3]int{post, browserWebSocket(t, strings.Replace(d.HTTPURL, "http", "ws", 1), p), browserWebSocket(t, d.RelayURL, p)}
	}
	allowed := [3]int{http.StatusOK, http.StatusSwitchingProtocols, http.StatusSwitchingProtocols}
	refused := [3]int{http.StatusForbidden, http.StatusForbidden, http.StatusForbidden}
	check := func(when string, want map[string][3]int) {
		t.Helper()
		for origin, w := range want {
			if got := served(origin); got != w {
				t.Errorf("%s: a page of %s: POST /snap, WebSocket /snap, WebSocket relay: %d; want %d", when, origin, got, w)
			}
		}
	}
	check("before the reload", map[string][3]int{"https://old.example": allowed, "https://app.example": refused})

	setOrigins(`["https://app.example", "https://other.example"]`)
	logged := hup("settings reloaded")
	if strings.Contains(logged, "need a restart") {
		t.Errorf("the origins were taken as needing a restart:\n%s", logged)
	}
	for _, name := range []string{"http_allowed_origins", "relay_allowed_origins"} {
		if !regexp.MustCompile(name + `.*added="?\[https://app.example https://other.example\]"? removed="?\[https://old.example\]`).MatchString(logged) {
			t.Errorf("the change of %s is not logged with the origins added and removed:\n%s", name, logged)
		}
	}
	check("after the reload", map[string][3]int{"https://old.example": refused, "https://app.example": allowed, "https://other.example": allowed})

	// A list that does not parse: refused, naming the setting; the lists
	// in force stay.
	setOrigins(`["app.example"]`)
	if l := hup("settings not reloaded"); !strings.Contains(l, "http_allowed_origins") {
		t.Errorf("the refusal does not name the setting:\n%s", l)
	}
	check("after a refused reload", map[string][3]int{"https://old.example": refused, "https://app.example": allowed})

	setOrigins(`["https://other.example"]`)
	hup("settings reloaded")
	check("after app.example was removed", map[string][3]int{"https://app.example": refused, "https://other.example": allowed})
}
