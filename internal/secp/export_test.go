package secp

// RaceEnabled tells the package's external tests that the race detector,
// which makes field arithmetic about ten times slower, is on.
const RaceEnabled = raceEnabled

// Verified is verified, for the tests that drive promotion without
// signatures.
func (t *Tables[K]) Verified(k K, p *PublicKey, u *Uses) { t.verified(k, p, u) }

// Builds returns how many tables t has built.
func (t *Tables[K]) Builds() uint64 { return t.builds.Load() }

// SetReplaceEvery sets t's budget of replacing builds to one per n
// verifications (0: no budget, as before it had one), for the benchmark
// comparing both; call it before t is used.
func (t *Tables[K]) SetReplaceEvery(n uint64) { t.every = n }

// Advance moves t's clock of idleness n verifications on, as n
// signatures verified by keys t never sees again would.
func (t *Tables[K]) Advance(n uint64) { t.tick.Add(n) }
