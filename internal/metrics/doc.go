// Package metrics is snapnode's Prometheus instrumentation: what the node
// exposes at GET /metrics, in the Prometheus text format, through the
// Prometheus client library.
//
//	m := metrics.New(metrics.Options{Methods: router.Methods()})
//	m.Observe("message/send", 0, verifyTime, handleTime)  // from the snap server
//	m.SetRelays(func() []metrics.Relay { … })             // read at each scrape
//	m.SetTaskStates(func(ctx context.Context) (map[string]int64, error) { … })
//	m.SetReplaySize(func(ctx context.Context) (int64, error) { … })
//	http.Handle("/metrics", m.Handler())
//
// # Series
//
//	snapnode_messages_total{method, outcome}      requests answered; outcome "ok" or "error"
//	snapnode_errors_total{code}                   error responses by SNAP code
//	snapnode_verify_seconds                       validation and signature time, a histogram
//	snapnode_handle_seconds{method}               handler time, a histogram
//	snapnode_relay_connections{url, state}        1 for each relay's current state
//	snapnode_relay_events_received_total{url}     events each relay sent, before any check
//	snapnode_relay_events_dropped_total{url, reason}  of them, not delivered: filter, invalid, duplicate
//	snapnode_relay_publish_failed_total{url}      publications each relay refused or left unanswered
//	snapnode_tasks{state}                         tasks in the store by state
//	snapnode_replay_records                       records in the replay store
//	snapnode_database_checkpoints_total{result}   SQLite WAL checkpoints, done or failed
//	snapnode_replicas_alive                       PostgreSQL replicas sharing the requests
//	snapnode_inbox_shared_total{outcome}          other replicas' requests: kept, taken_up, left
//	snapnode_agent_jobs{status}                   the agent's jobs by manifest status
//	snapnode_agent_model_calls_total{status}      model calls: SUCCESS, ERROR, TIMEOUT
//	snapnode_agent_model_call_seconds             model call time, a histogram
//	snapnode_agent_cost_cents_total               what the model calls cost
//	snapnode_agent_worker_stale_lines_total       external workers' lines for past steps, skipped
//	go_*, process_*                               the runtime and the process
//
// Label values are bounded: a method not given in Options.Methods is
// counted as "other", a code outside 1000–5999 as "other", so a peer
// cannot grow the series without end by inventing method names; the
// other labels take values the node defines (states, statuses, the
// configured relays). The operator guide lists the series for users
// (TestMetricsDocumented in internal/node checks it against a node).
//
// The gauges read from the node (tasks, replay records, relays) are
// computed at scrape time, with a time limit, rather than kept up to date
// on every change; the relays' counters are the relay pool's own atomic
// counters, read then too (nothing is locked per event to count it).
package metrics
