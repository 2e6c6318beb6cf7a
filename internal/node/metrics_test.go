package node_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snaphttp"
)

// GET /metrics on the node's HTTP transport: the Prometheus series count
// the answers the node gave, and read the relays, the tasks by state and
// the replay store.
func TestMetricsEndpoint(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	alice := newRequester(t, n.RelayURLs())
	if p := alice.call(t, n, "message/send", text("count-me"), false); p["task"] == nil {
		t.Fatalf("message/send: %v", p)
	} else {
		noAgent(t, "message/send", taskOf(t, p)) // free text, and no agent: failed at once
	}
	if code := errCode(alice.call(t, n, "tasks/get", map[string]any{"taskId": "no-such-task"}, false)); code != 1001 {
		t.Fatalf("tasks/get of nothing: %d", code)
	}
	resp, err := http.Get(n.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`snapnode_messages_total{method="message/send",outcome="ok"} 1`,
		`snapnode_messages_total{method="tasks/get",outcome="error"} 1`,
		`snapnode_errors_total{code="1001"} 1`,
		`snapnode_relay_connections{state="connected",url="` + n.RelayURLs()[0] + `"} 1`,
		"snapnode_replay_records 2",
		"snapnode_verify_seconds_count 2",
		`snapnode_tasks{state="failed"} 1`,
		`snapnode_tasks{state="submitted"} 0`,
		`snapnode_tasks{state="completed"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// With metrics_listen, /metrics is served on that address only (the
// HTTP transport's answers 404), and there too each peer is limited to
// monitor_rate: past monitor_burst, 429 with Retry-After. The transport's
// /healthz is limited the same way.
func TestMetricsListen(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen, c.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
		c.MonitorRate, c.MonitorBurst = 0.001, 2
	})
	if n.MetricsURL() == "" || n.MetricsURL() == n.HTTPURL() {
		t.Fatalf("metrics at %q, HTTP at %q: want an address of its own", n.MetricsURL(), n.HTTPURL())
	}
	get := func(url string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	if code, _, _ := get(n.HTTPURL() + "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the HTTP transport: %d, want 404", code)
	}
	for i := range 2 {
		if code, _, body := get(n.MetricsURL() + "/metrics"); code != 200 || !strings.Contains(body, "snapnode_tasks") {
			t.Fatalf("scrape %d within the burst: %d %.200s", i+1, code, body)
		}
	}
	if code, after, _ := get(n.MetricsURL() + "/metrics"); code != http.StatusTooManyRequests || after == "" {
		t.Errorf("scrape past the burst: %d, Retry-After %q; want 429 with a delay", code, after)
	}
	for i := range 2 {
		if code, _, _ := get(n.HTTPURL() + "/healthz"); code != 200 {
			t.Fatalf("health check %d within the burst: %d", i+1, code)
		}
	}
	if code, after, _ := get(n.HTTPURL() + "/healthz"); code != http.StatusTooManyRequests || after == "" {
		t.Errorf("health check past the burst: %d, Retry-After %q; want 429 with a delay", code, after)
	}
}

// /metrics on metrics_listen answers only the host names the HTTP
// transport answers to: a request addressed to another name (a page whose
// own name its DNS made resolve to the node's address, DNS rebinding)
// gets 421 with an error body, and the page reads nothing; by address and
// by localhost it is served.
func TestMetricsListenRefusesOtherHosts(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen, c.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	})
	get := func(host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", n.MetricsURL()+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("rebound.example:80"); code != http.StatusMisdirectedRequest || strings.Contains(body, "snapnode_") || !strings.Contains(body, `"code":1003`) {
		t.Errorf("/metrics to another host name: %d %.300s; want 421 with an error body", code, body)
	}
	for _, host := range []string{"", "localhost"} {
		if code, body := get(host); code != 200 || !strings.Contains(body, "snapnode_tasks") {
			t.Errorf("/metrics to %q: %d %.200s", host, code, body)
		}
	}
}

// metrics_listen caps the connections of one address
// (8): a client that opens more and
// trickles their headers has its longest-idle one closed at once, where
// each was held until the header time-out (10 s) and an address could
// hold any number of the node's file descriptors.
func TestMetricsListenCapsConnections(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) {
		c.HTTPListen, c.MetricsListen = "127.0.0.1:0", "127.0.0.1:0"
	})
	hostport := strings.TrimPrefix(n.MetricsURL(), "http://")
	open := func() net.Conn {
		c, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /metrics HTTP/1.1\r\n") // headers never finished
		return c
	}
	first := open()
	for range snaphttp.DefaultMonitorConnsPerPeer {
		open()
	}
	// Well within the header time-out: the server, not the time-out,
	// closes it.
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the longest-idle connection over the cap: read %v, want it closed", err)
	}
}

// metricsGet fetches /metrics at the HTTP transport's port from a client
// bound to the address from (a local address of this machine) and to
// host, and returns the status and body.
func metricsGet(t *testing.T, n *node.Node, from, host string) (int, string) {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(n.HTTPURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Get("http://" + net.JoinHostPort(host, port) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /metrics on http_listen answers clients on loopback only by default: a
// node listening on every address, asked from the machine's address other
// than loopback, answers the very 404 it gives when metrics_listen moves
// the metrics elsewhere, so nothing tells a stranger that metrics exist.
// Before, anyone who reached http_listen read them. The node says at
// start where metrics are served and to whom.
func TestMetricsOnHTTPLoopbackOnly(t *testing.T) {
	addr := nettest.MachineIPv4(t)
	var log testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "0.0.0.0:0"
	n, _ := startConfigured(t, cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if code, body := metricsGet(t, n, "127.0.0.1", "127.0.0.1"); code != 200 || !strings.Contains(body, "snapnode_tasks") {
		t.Errorf("/metrics from loopback: %d %.200s; want 200 and the series", code, body)
	}
	code, body := metricsGet(t, n, addr, addr)
	if code != http.StatusNotFound || strings.Contains(body, "snapnode_") {
		t.Errorf("/metrics from %s: %d %.200s; want 404 and no series", addr, code, body)
	}
	moved, _ := startNode(t, func(c *config.Config) { c.HTTPListen, c.MetricsListen = "127.0.0.1:0", "127.0.0.1:0" })
	if wantCode, want := metricsGet(t, moved, "127.0.0.1", "127.0.0.1"); code != wantCode || body != want {
		t.Errorf("/metrics from %s: %d %.300q; want the 404 of a node with metrics_listen: %d %q", addr, code, body, wantCode, want)
	}
	if lines := strings.Count(log.String(), `msg="serving metrics"`); lines != 1 || !strings.Contains(log.String(), "clients=loopback") {
		t.Errorf("the log says %d times where metrics are served, want once, to loopback clients:\n%s", lines, log.String())
	}
}

// metrics_public serves /metrics on http_listen to clients off loopback
// too, and the node says so at start.
func TestMetricsPublic(t *testing.T) {
	addr := nettest.MachineIPv4(t)
	var log testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen, cfg.MetricsPublic = "127.0.0.1:0", "0.0.0.0:0", true
	n, _ := startConfigured(t, cfg, slog.New(slog.NewTextHandler(&log, nil)))
	for _, from := range []string{"127.0.0.1", addr} {
		if code, body := metricsGet(t, n, from, from); code != 200 || !strings.Contains(body, "snapnode_tasks") {
			t.Errorf("/metrics from %s with metrics_public: %d %.200s; want 200 and the series", from, code, body)
		}
	}
	if lines := strings.Count(log.String(), `msg="serving metrics"`); lines != 1 || !strings.Contains(log.String(), "clients=any") {
		t.Errorf("the log says %d times where metrics are served, want once, to any client:\n%s", lines, log.String())
	}
}
