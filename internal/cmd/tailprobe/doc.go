// Command tailprobe measures the latency spread this machine gives a
// request shaped like a Nostr round trip, without any of the node's code
// (docs/benchmarks.md, "The collector in the tail"): a peer process
// verifies, sends 1 KiB over loopback TCP, a server process hands it from
// its reader goroutine to a worker goroutine that verifies, then to a
// writer goroutine that answers; the peer verifies the answer. The work
// is real BIP-340 verification (btcec), sized in microseconds of CPU.
//
//	go run ./internal/cmd/tailprobe -serve -server-us 1100 &   # prints its address
//	go run ./internal/cmd/tailprobe -to ADDR -before-us 250 -after-us 250 -duration 10s
//
// -alloc-kb leaves garbage behind each request on both sides, -split has
// the server's reader verify once before its hand-off (as the relay checks
// an event before passing it on), -peer-reader has the peer read answers
// in a goroutine of their own (as a relay pool does).
package main
