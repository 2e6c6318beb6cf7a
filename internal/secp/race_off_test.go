//go:build !race

package secp

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = false
