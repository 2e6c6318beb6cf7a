// Command attack measures the node under one of the attacks its resource
// bounds answer, for the figures of docs/security.md. It builds and starts
// `snapnode run` as a child process (given 1,024 open files, as on a
// common host), runs the attack on it, and meanwhile has a valid peer send
// the same request again and again; then it prints the valid peer's p50
// and p99 latency, its failures and the node's peak RSS:
//
//	go run ./internal/cmd/attack -attack streams           # the defaults
//	go run ./internal/cmd/attack -attack streams -before   # the defence off
//
// The attacks, and what -before changes through the node's settings:
//
//   - dirbomb: one identity sends WRITE_FILE proposals, each making 31
//     nested new folders, as fast as its identity allowance lets it; the
//     valid peer writes a small file. -before lifts the requester's folder
//     quota (--executor-quota-dirs 1000000000).
//   - idle: 2,000 idle TCP connections from 100 loopback addresses; the
//     valid peer sends a signed tasks/get. -before lifts the connection
//     caps (--http-max-conns and --http-max-conns-per-peer 1000000).
//   - streams: 300 fresh identities open message/stream on free-text tasks
//     that stay open (the model server never answers), retrying when
//     refused; the node has 200 stream slots; the valid peer, known to the
//     node, streams a WRITE_FILE proposal. -before lets newcomers take
//     every slot and refuses at once (--max-newcomer-streams 200
//     --stream-wait-timeout 0s).
//   - bodies: 100 peers post 10 MiB bodies at once, again as soon as they
//     are answered; the valid peer sends a signed tasks/get. -before lifts
//     the memory bound of bodies (--http-body-memory 1 TiB).
//
// Runs are short (-duration, 20 s by default): the attack is given a few
// seconds to build up, then the valid peer's requests are timed until the
// end.
package main
