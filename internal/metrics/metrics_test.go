package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/snapnode/snapnode/internal/metrics"
)

func TestObserve(t *testing.T) {
	m := metrics.New(metrics.Options{Methods: []string{"message/send", "tasks/get"}})
	m.Observe("message/send", 0, 80*time.Microsecond, 2*time.Millisecond)
	m.Observe("message/send", 0, 90*time.Microsecond, 3*time.Millisecond)
	m.Observe("message/send", 1004, 70*time.Microsecond, time.Millisecond)
	m.Observe("tasks/get", 1001, 60*time.Microsecond, 0)
	m.Observe("made/up", 1007, 50*time.Microsecond, 0) // an unknown method: "other"
	m.Observe("snap/error", 2001, 0, 0)                // never verified, never handled
	m.Observe("message/send", 99999, 0, 0)             // not a SNAP code: "other"
	want := `
# HELP snapnode_messages_total SNAP requests answered, by method and outcome (ok or error).
# TYPE snapnode_messages_total counter
snapnode_messages_total{method="message/send",outcome="error"} 2
snapnode_messages_total{method="message/send",outcome="ok"} 2
snapnode_messages_total{method="other",outcome="error"} 2
snapnode_messages_total{method="tasks/get",outcome="error"} 1
# HELP snapnode_errors_total SNAP error responses, by error code.
# TYPE snapnode_errors_total counter
snapnode_errors_total{code="1001"} 1
snapnode_errors_total{code="1004"} 1
snapnode_errors_total{code="1007"} 1
snapnode_errors_total{code="2001"} 1
snapnode_errors_total{code="other"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "snapnode_messages_total", "snapnode_errors_total"); err != nil {
		t.Error(err)
	}
	// Five validations took time, three handlers of message/send did.
	if n := testutil.CollectAndCount(m.Registry(), "snapnode_verify_seconds"); n != 1 {
		t.Errorf("verify histogram series: %d", n)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			if h := mt.GetHistogram(); h != nil {
				key := mf.GetName()
				for _, l := range mt.GetLabel() {
					key += "," + l.GetValue()
				}
				counts[key] = h.GetSampleCount()
			}
		}
	}
	if counts["snapnode_verify_seconds"] != 5 || counts["snapnode_handle_seconds,message/send"] != 3 || counts["snapnode_handle_seconds,tasks/get"] != 0 {
		t.Errorf("histogram counts: %v", counts)
	}
}

func TestGaugesAtScrape(t *testing.T) {
	m := metrics.New(metrics.Options{})
	calls := 0
	m.SetRelays(func() []metrics.Relay {
		return []metrics.Relay{
			{URL: "wss://a.example", State: "connected", EventsReceived: 9, EventsFiltered: 1, EventsInvalid: 2, EventsDuplicate: 3},
			{URL: "wss://b.example", State: "backoff", PublishFailed: 5, CatchUpPages: 6, CatchUpsCut: 1},
		}
	})
	m.SetTaskStates(func(context.Context) (map[string]int64, error) {
		calls++
		return map[string]int64{"submitted": 3, "completed": int64(calls)}, nil
	})
	m.SetReplaySize(func(context.Context) (int64, error) { return 42, nil })
	m.SetCheckpoints(func() (int64, int64) { return 7, 1 })
	m.SetShares(func() metrics.Shares { return metrics.Shares{Alive: 2, Kept: 10, Taken: 3, Left: 6} })
	m.SetWorkerStaleLines(func() int64 { return 4 })
	m.SetInboxExpired(func() int64 { return 5 })
	want := `
# HELP snapnode_agent_worker_stale_lines_total Lines the agent's external workers wrote for a past step: each skipped, never run.
# TYPE snapnode_agent_worker_stale_lines_total counter
snapnode_agent_worker_stale_lines_total 4
# HELP snapnode_database_checkpoints_total WAL checkpoints of the SQLite database run beside its writer, by result (done, failed).
# TYPE snapnode_database_checkpoints_total counter
snapnode_database_checkpoints_total{result="done"} 7
snapnode_database_checkpoints_total{result="failed"} 1
# HELP snapnode_inbox_expired_total Nostr requests dropped unprocessed because their NIP-40 expiration had passed, as they were received or as their turn came.
# TYPE snapnode_inbox_expired_total counter
snapnode_inbox_expired_total 5
# HELP snapnode_inbox_shared_total Nostr requests that were another replica's share, by outcome: kept (passed over unopened), taken_up (their owner stopped, this process answered them), left (their owner had them).
# TYPE snapnode_inbox_shared_total counter
snapnode_inbox_shared_total{outcome="kept"} 10
snapnode_inbox_shared_total{outcome="left"} 6
snapnode_inbox_shared_total{outcome="taken_up"} 3
# HELP snapnode_relay_catchup_pages_total Pages of stored events asked of each relay after a subscription's REQ, to read back what its cap on a REQ's stored events left out.
# TYPE snapnode_relay_catchup_pages_total counter
snapnode_relay_catchup_pages_total{url="wss://a.example"} 0
snapnode_relay_catchup_pages_total{url="wss://b.example"} 6
# HELP snapnode_relay_catchups_cut_total Catch-ups of each relay's stored events that stopped short (at the bound of pages, the relay refused a page for good, or it sent no EOSE in time): its resume point stayed where it was.
# TYPE snapnode_relay_catchups_cut_total counter
snapnode_relay_catchups_cut_total{url="wss://a.example"} 0
snapnode_relay_catchups_cut_total{url="wss://b.example"} 1
# HELP snapnode_relay_connections 1 for the current connection state of each relay.
# TYPE snapnode_relay_connections gauge
snapnode_relay_connections{state="backoff",url="wss://b.example"} 1
snapnode_relay_connections{state="connected",url="wss://a.example"} 1
# HELP snapnode_relay_events_dropped_total Events each relay sent that were not delivered, by reason: filter (outside the subscription's filter), invalid (bad id or signature), duplicate (delivered already).
# TYPE snapnode_relay_events_dropped_total counter
snapnode_relay_events_dropped_total{reason="duplicate",url="wss://a.example"} 3
snapnode_relay_events_dropped_total{reason="duplicate",url="wss://b.example"} 0
snapnode_relay_events_dropped_total{reason="filter",url="wss://a.example"} 1
snapnode_relay_events_dropped_total{reason="filter",url="wss://b.example"} 0
snapnode_relay_events_dropped_total{reason="invalid",url="wss://a.example"} 2
snapnode_relay_events_dropped_total{reason="invalid",url="wss://b.example"} 0
# HELP snapnode_relay_events_received_total Events each relay sent the node, before any check.
# TYPE snapnode_relay_events_received_total counter
snapnode_relay_events_received_total{url="wss://a.example"} 9
snapnode_relay_events_received_total{url="wss://b.example"} 0
# HELP snapnode_relay_publish_failed_total Publications each relay refused (OK false) or did not answer in time.
# TYPE snapnode_relay_publish_failed_total counter
snapnode_relay_publish_failed_total{url="wss://a.example"} 0
snapnode_relay_publish_failed_total{url="wss://b.example"} 5
# HELP snapnode_replay_records Records in the replay store.
# TYPE snapnode_replay_records gauge
snapnode_replay_records 42
# HELP snapnode_replicas_alive Processes of this identity sharing the Nostr requests, as this one counts them (itself included while it receives).
# TYPE snapnode_replicas_alive gauge
snapnode_replicas_alive 2
# HELP snapnode_tasks Tasks in the store, by state.
# TYPE snapnode_tasks gauge
snapnode_tasks{state="completed"} 1
snapnode_tasks{state="submitted"} 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"snapnode_agent_worker_stale_lines_total", "snapnode_database_checkpoints_total", "snapnode_inbox_expired_total", "snapnode_inbox_shared_total", "snapnode_relay_catchup_pages_total", "snapnode_relay_catchups_cut_total", "snapnode_relay_connections",
		"snapnode_relay_events_dropped_total", "snapnode_relay_events_received_total", "snapnode_relay_publish_failed_total", "snapnode_replay_records", "snapnode_replicas_alive", "snapnode_tasks"); err != nil {
		t.Error(err)
	}
	// Read again at the next scrape, not cached.
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP snapnode_tasks Tasks in the store, by state.
# TYPE snapnode_tasks gauge
snapnode_tasks{state="completed"} 2
snapnode_tasks{state="submitted"} 3
`), "snapnode_tasks"); err != nil {
		t.Error(err)
	}
}

// A source that fails does not hide the others: the handler still serves
// every other series, over a real HTTP server.
func TestHandlerWithFailingSource(t *testing.T) {
	m := metrics.New(metrics.Options{Methods: []string{"message/send"}})
	m.SetTaskStates(func(context.Context) (map[string]int64, error) { return nil, errors.New("database is locked") })
	m.SetReplaySize(func(ctx context.Context) (int64, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("no time limit on a scrape-time source")
		}
		return 7, nil
	})
	m.Observe("message/send", 0, time.Millisecond, time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`snapnode_messages_total{method="message/send",outcome="ok"} 1`,
		"snapnode_replay_records 7",
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in the scrape", want)
		}
	}
	if strings.Contains(text, "snapnode_tasks{") {
		t.Error("a failed source produced task series")
	}
}

func BenchmarkObserve(b *testing.B) {
	m := metrics.New(metrics.Options{Methods: []string{"message/send", "tasks/get", "tasks/cancel"}})
	b.Run("observe", func(b *testing.B) {
		for b.Loop() {
			m.Observe("message/send", 0, 80*time.Microsecond, 2*time.Millisecond)
		}
	})
	// Baseline: one increment of a bare Prometheus counter, the least a
	// counted request costs.
	b.Run("baseline-counter", func(b *testing.B) {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
		for b.Loop() {
			c.Inc()
		}
	})
}
