package snaphttp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snaphttp"
)

// refusal is one HTTP answer the server wrote before a SNAP message was
// parsed.
type refusal struct {
	name   string
	status int
	header http.Header
	body   []byte
}

// readRefusal reads one HTTP response from c.
func readRefusal(t *testing.T, name string, c net.Conn) refusal {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return refusal{name, resp.StatusCode, resp.Header, b}
}

// do sends req and returns its answer.
func do(t *testing.T, name string, hc *http.Client, req *http.Request) refusal {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return refusal{name, resp.StatusCode, resp.Header, b}
}

// TestRefusalBodiesMatchErrorSchema provokes, over real sockets, every
// refusal the HTTP server writes before a SNAP message is parsed — the
// rate limits (per address, monitoring, Monitor), the body limits (413,
// 400, 415, 429 of body memory), the routes (404, 405, 426), the WebSocket
// refusals (400 and 403 of the upgrade, 429 and 503 of the connection
// caps), a browser page's POST from another origin (403), a request to
// another host name (421), HTTP/2 prior knowledge and another request
// target "*" than OPTIONS' (400), and the TCP connection cap (429) — and holds each body to the
// SNAP specification's error schema: {"error":{code, message, data?}},
// no other member, whatever else the refusal says (the HTTP status,
// retryAfter, limit, scope) under data, data.retryAfter equal to the
// Retry-After header when there is one.
func TestRefusalBodiesMatchErrorSchema(t *testing.T) {
	errSchema := snapref.Schemas(t)("error.schema.json")
	h, entered, release := holdFirst()
	defer close(release)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	e := start(t, h, func(c *snaphttp.Config) {
		c.Rate, c.Burst = rate.Every(time.Hour), 3
		c.MonitorRate, c.MonitorBurst = rate.Every(time.Hour), 1
		c.MaxBody, c.BodyMemory = 64<<10, 1<<20
		c.MaxConnsPerPeer, c.MaxConns = 1, 2
		c.Metrics = metrics
	})
	without := start(t, nil, func(c *snaphttp.Config) { c.Card = nil })
	capHooks, capEntered, capRelease := holdFirst()
	defer close(capRelease)
	capped := start(t, capHooks, func(c *snaphttp.Config) { c.MaxTCPConnsPerPeer = 1 })
	hostport := strings.TrimPrefix(e.base, "http://")
	// Each refusal comes from an address of its own, so that the
	// address limits of one do not refuse another.
	src := 10
	next := func() string { src++; return fmt.Sprintf("127.0.0.%d", src) }
	var got []refusal
	get := func(name, method, url string, hdr map[string]string) {
		req, _ := http.NewRequest(method, url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		got = append(got, do(t, name, clientFrom(next()), req))
	}
	raw := func(name, from, request string) {
		c := dialFrom(t, from, hostport)
		defer c.Close()
		io.WriteString(c, request)
		got = append(got, readRefusal(t, name, c))
	}

	// Routes.
	get("unknown path", "GET", e.base+"/nothing", nil)
	get("no card", "GET", without.base+snaphttp.WellKnownPath, nil)
	get("no metrics", "GET", without.base+"/metrics", nil)
	get("PUT /snap", "PUT", e.base+"/snap", nil)
	get("GET /snap without upgrade", "GET", e.base+"/snap", nil)
	// The WebSocket upgrade.
	ws := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	get("upgrade of a wrong version", "GET", e.base+"/snap", ws)
	ws["Sec-WebSocket-Version"] = "13"
	ws["Origin"] = "https://elsewhere.example"
	get("upgrade from a refused origin", "GET", e.base+"/snap", ws)
	// A browser page of another origin, and DNS rebinding.
	get("POST from a page of another origin", "POST", e.base+"/snap", map[string]string{"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"})
	raw("request to another host name", next(), "GET /healthz HTTP/1.1\r\nHost: elsewhere.example\r\n\r\n")
	// HTTP/2 in cleartext (prior knowledge), which is not served, and
	// the request target "*" of another method than OPTIONS.
	raw("HTTP/2 prior knowledge", next(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	raw("request target *", next(), "GET * HTTP/1.1\r\nHost: localhost\r\n\r\n")
	// Bodies.
	raw("body over MaxBody", next(), "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n")
	big := bytes.Repeat([]byte("a"), 70<<10)
	raw("chunked body over MaxBody", next(), fmt.Sprintf("POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(big), big))
	raw("body not JSON", next(), "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello")
	raw("body of another Content-Type", next(), "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 2\r\n\r\n{}")
	raw("body in a content coding", next(), "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}")
	raw("body unreadable", next(), "POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
	// The address's rate limit (a burst of 3).
	limited := next()
	for range 3 {
		req, _ := http.NewRequest("GET", e.base+snaphttp.WellKnownPath, nil)
		do(t, "within the burst", clientFrom(limited), req)
	}
	req, _ := http.NewRequest("GET", e.base+snaphttp.WellKnownPath, nil)
	got = append(got, do(t, "over the address's rate", clientFrom(limited), req))
	// Monitoring's rate (a burst of 1), and Monitor's.
	monitored := clientFrom(next())
	req, _ = http.NewRequest("GET", e.base+"/healthz", nil)
	do(t, "healthz", monitored, req)
	req, _ = http.NewRequest("GET", e.base+"/healthz", nil)
	got = append(got, do(t, "over the monitoring rate", monitored, req))
	own := httptest.NewServer(snaphttp.Monitor(metrics, rate.Every(time.Hour), 1))
	defer own.Close()
	for i := range 2 {
		req, _ := http.NewRequest("GET", own.URL+"/metrics", nil)
		if r := do(t, "Monitor", http.DefaultClient, req); i == 1 {
			got = append(got, r)
		}
	}
	// WebSocket connection caps: one per peer, two in all.
	wsFrom := func(from string) (*websocket.Conn, *http.Response, error) {
		d := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) { return dialFrom(t, from, addr), nil }}
		return d.Dial(e.ws, nil)
	}
	peer := next()
	for _, from := range []string{peer, peer, next(), next()} {
		c, resp, err := wsFrom(from)
		if err == nil {
			defer c.Close()
			continue
		}
		if resp == nil {
			t.Fatalf("WebSocket from %s: %v", from, err)
		}
		b, _ := io.ReadAll(resp.Body)
		got = append(got, refusal{"WebSocket over a cap", resp.StatusCode, resp.Header, b})
	}
	// Body memory: a peer whose body is held sends another (a peer's
	// share of 1 MiB is 64 KiB, a body 40 KiB).
	busy := next()
	body := signedOfSize(t, 40<<10)
	postHeld := func(hostport string) net.Conn {
		c := dialFrom(t, busy, hostport)
		fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return c
	}
	c := postHeld(hostport)
	defer c.Close()
	<-entered
	raw("over the peer's body memory", busy, fmt.Sprintf("POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	// The TCP connection cap: a peer whose one connection is busy.
	capHost := strings.TrimPrefix(capped.base, "http://")
	c = postHeld(capHost)
	defer c.Close()
	<-capEntered
	c2 := dialFrom(t, busy, capHost)
	defer c2.Close()
	io.WriteString(c2, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	got = append(got, readRefusal(t, "over the peer's connections", c2))

	if len(got) != 24 {
		t.Fatalf("%d refusals, want 24", len(got))
	}
	for _, r := range got {
		if r.status < 400 {
			t.Errorf("%s: status %d, not a refusal: %s", r.name, r.status, r.body)
			continue
		}
		var doc struct {
			Error json.RawMessage `json:"error"`
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &members); err != nil || len(members) != 1 || json.Unmarshal(r.body, &doc) != nil || doc.Error == nil {
			t.Errorf("%s (%d): body %s is not {\"error\": …}", r.name, r.status, r.body)
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc.Error))
		if err != nil {
			t.Fatal(err)
		}
		if err := errSchema.Validate(v); err != nil {
			t.Errorf("%s (%d): the error %s breaks the error schema: %v", r.name, r.status, doc.Error, err)
			continue
		}
		var e struct {
			Data struct {
				Status     int  `json:"status"`
				RetryAfter *int `json:"retryAfter"`
			} `json:"data"`
		}
		json.Unmarshal(doc.Error, &e)
		if e.Data.Status != r.status {
			t.Errorf("%s (%d): data.status %d", r.name, r.status, e.Data.Status)
		}
		if h := r.header.Get("Retry-After"); h != "" {
			if secs, _ := strconv.Atoi(h); e.Data.RetryAfter == nil || *e.Data.RetryAfter != secs {
				t.Errorf("%s (%d): Retry-After %q but data %s", r.name, r.status, h, doc.Error)
			}
		}
	}
}
