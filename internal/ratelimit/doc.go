// Package ratelimit keeps one token bucket per key (an identity, a Nostr
// key, a remote address) in a bounded map: the buckets of keys not seen
// for the longest time are dropped first when it is full, which gives
// such a key a full bucket again.
//
//	l := ratelimit.New(ratelimit.Config{Rate: 10, Burst: 20, MaxKeys: 100_000})
//	if ok, wait := l.Allow(from); !ok {
//		// refuse: 5002 with data {"retryAfter": seconds(wait)}
//	}
//
// The buckets are golang.org/x/time/rate's; this package adds the keyed,
// bounded map and the time to wait before the next token.
package ratelimit
