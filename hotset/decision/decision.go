// Package decision is the contract of the hot set's changes: a Decision is
// one promotion or demotion of a key that an aggregator shard decided. The
// shard hands its decisions to its recorder (aggregator.Config.Recorder), and
// hotspotd's recorders publish them: as the app's history in Redis
// (internal/history) and as the app's webhooks (internal/webhook).
// docs/history.md documents the fields as both store and send them.
//
// The package imports nothing of Hotspot, so those that publish decisions
// depend on what a decision is, not on the aggregator that makes them.
package decision

import "time"

// Kinds of Decision.
const (
	Promoted = "promoted" // the key turned hot
	Demoted  = "demoted"  // the key turned cold
)

// DefaultRule is the rule index of the default rule (hotspotd's threshold
// and window), which keys that no rule of their app matches follow.
const DefaultRule = -1

// Decision is one promotion or demotion a shard decided.
type Decision struct {
	App  string
	Key  string
	Kind string    // Promoted or Demoted
	At   time.Time // when the shard decided it, on its clock
	Rate float64   // the rule's quantity per second (accesses or bytes) over its window at the decision
	Rule int       // index of the app's rule that decided it; DefaultRule for the default
	// Sources are a promoted key's busiest sources (at most 8, busiest
	// first) as the shard saw them at the promotion; nil for a demotion,
	// or when none were reported (a key without sourced accesses).
	Sources []SourceShare
}

// SourceShare is one source of a key's accesses (an app instance, a
// client) and its share of them, a fraction from 0 to 1.
type SourceShare struct {
	Source string  `json:"source"`
	Share  float64 `json:"share"`
}
