// Package relay will hold everything Nostr: the relay pool (reconnect,
// back-off, resubscribe, dedupe), the inbox and outbox (NIP-44), card
// publishing and discovery, and the embedded relay server. It must not know
// task semantics. Nothing is implemented yet: it arrives with the node
// issue, on top of the protocol core in snap and identity.
package relay
