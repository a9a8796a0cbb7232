//go:build race

package aggregator

// raceEnabled tells tests that scale their load down under the race detector.
const raceEnabled = true
