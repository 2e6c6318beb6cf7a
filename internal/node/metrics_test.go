package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
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
