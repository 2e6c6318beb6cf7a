//go:build race

package embedded

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
