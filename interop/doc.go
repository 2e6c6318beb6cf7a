// Package interop holds snapnode's cross-implementation tests: the Go
// packages (identity, snap, and go-nostr as the Nostr layer) against an
// independent JavaScript implementation of the SNAP client side and a
// third-party Nostr relay, both in interop/js and driven through
// internal/jsinterop. The package has no code of its own; its tests skip
// when interop/js/node_modules is absent (run `npm ci` there), and fail
// instead when the CI environment variable is set.
package interop
