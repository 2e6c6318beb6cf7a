// Package jsinterop lets Go tests drive the independent JavaScript SNAP
// implementation in interop/js: the client CLI (client.mjs, built on
// nostr-tools and @noble/curves) and a third-party Nostr relay
// (relay.mjs, @nostr-relay/core on ws). It shares no protocol code with
// the Go side; it only starts the processes and reads their JSON lines.
//
//	node := jsinterop.Node(t)                    // skips (or fails in CI) without npm ci
//	url := jsinterop.StartRelay(t)               // stopped in t.Cleanup
//	out, code := jsinterop.Run(t, ctx, "request", "--relay", url, ...)
//	replies, sent := jsinterop.Lines(t, out)
//
// The node_modules folder is installed by `npm ci` in interop/js (.ci/run
// does it). Without it a test skips, unless the CI environment variable is
// set, when it fails: CI must never skip these tests silently.
package jsinterop
