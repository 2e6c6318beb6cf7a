// Package textcut cuts text to a number of bytes without splitting a
// character: what a bound on a log line, an error's echo of a peer's
// value or a prompt's share keeps of a longer text.
//
//	textcut.Prefix("héllo", 2)        // "h": the two bytes of é stay together
//	textcut.Shorten("a long reason", 6, "…") // "a long…"
//
// Text that is not valid UTF-8 is cut at the same places: a byte that
// cannot continue a sequence counts as a character's start.
package textcut
