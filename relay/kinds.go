package relay

// Nostr event kinds SNAP uses (none is in a NIP yet).
const (
	KindCard       = 31337 // Agent Card, addressable by (pubkey, d = P2TR)
	KindMessage    = 4339  // SNAP message, stored by relays (persist)
	KindEphemeral  = 21339 // SNAP message, forwarded and never stored
	MaxNIP44Plain  = 65535 // bytes of plaintext NIP-44 v2 can carry
	DefaultReplyTT = 7 * 24 * 60 * 60
)
