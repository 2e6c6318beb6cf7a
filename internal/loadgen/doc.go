// Package loadgen drives a SNAP node with simulated peers and measures
// what they see: the load behind `snapnode bench`.
//
// Each Peer is an identity of its own reaching the node through a
// client.Transport (Dial makes them over Nostr, HTTP and WebSocket). Run
// has every peer make one request at a time for a while, each drawn from a
// Mix of message/send, tasks/get and message/stream, and returns a Report:
// throughput, p50/p99/p999 latency by transport and request, failures by
// kind (ErrorKind), and the node's CPU and memory when it runs on the same
// machine (ReadProc, with the pid given or found by SocketPID from the
// node's admin socket).
//
//	peers, closePeers, err := loadgen.Dial(ctx, loadgen.Target{To: addr, Relays: relays, HTTP: endpoint,
//		Via: []string{loadgen.ViaNostr, loadgen.ViaHTTP}}, keys, logger)
//	defer closePeers()
//	report, err := loadgen.Run(ctx, loadgen.Config{Peers: peers, Mix: loadgen.DefaultMix(), Duration: 30 * time.Second})
//
// For a store seeded in bulk (SeedTask, as internal/cmd/seedtasks does),
// Keys derives the peers' identities from a seed so that they own the
// seeded tasks, and SeededTasks picks the tasks their tasks/get ask for.
//
// By default each peer sends its next request when the last is answered
// (a closed loop); Config.Rate makes the run an open loop at a fixed
// offered rate, latencies counted from when each request was due, and
// Config.Warmup runs the load for a while before the measured part.
//
// Latencies are kept per series up to a bound (a uniform sample beyond
// it), so a long run uses bounded memory.
package loadgen
