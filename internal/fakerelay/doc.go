// Package fakerelay runs WebSocket servers on loopback that play a Nostr
// relay by a script, for the tests of a client facing a relay that speaks
// NIP-01 badly or cheats: one that floods, ignores a REQ's limit, repeats
// itself, forges, or never answers.
//
//	url := fakerelay.Serve(t, fakerelay.AnswerREQ(func(*nostr.ReqEnvelope) []nostr.Event {
//		return flood // every REQ, whatever its filter, then EOSE
//	}))
//	late := fakerelay.Gated(t, open, fakerelay.AcceptEvents) // upgrades once open is closed
//
// The package imports none of snapnode's, so that the relay package's own
// tests can use it. It is for tests only: nothing outside _test.go files
// imports it.
package fakerelay
