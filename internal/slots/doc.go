// Package slots hands out a bounded number of long-lived slots — the
// node's stream slots — to claimants that may cost nothing to make.
//
// A claim names an identity (a SNAP address), the key behind it (the
// Nostr key, which both of its networks' addresses share) and whether the
// identity is known (it has a history here). The pool bounds the slots
// held in all, by one identity, by one key, and by newcomers together.
// When no slot is free for a claim it waits, in a bounded queue and for a
// bounded time: known claimants wait in a queue of their own that is
// served first, so that a flood of fresh identities waits behind the
// peers the node knows instead of starving them. A claim that still finds
// no slot when its time is up is refused with a *Full naming the bound.
package slots
