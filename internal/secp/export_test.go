package secp

// RaceEnabled tells the package's external tests that the race detector,
// which makes field arithmetic about ten times slower, is on.
const RaceEnabled = raceEnabled

// Verified is verified, for the tests that drive promotion without
// signatures.
func (t *Tables[K]) Verified(k K, p *PublicKey, u *Uses) { t.verified(k, p, u) }
