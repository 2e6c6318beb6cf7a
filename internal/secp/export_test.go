package secp

// RaceEnabled tells the package's external tests that the race detector,
// which makes field arithmetic about ten times slower, is on.
const RaceEnabled = raceEnabled
