//go:build race

package identity

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
