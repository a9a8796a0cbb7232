package shardapi

import (
	"errors"
	"time"
)

// ErrNoAnswer is wrapped by the error of a query to every shard (Top, Key,
// Effects, Instances over all shards) when no shard answered. When only some
// did not, the error does not wrap it, and the answers of the others come
// with it.
var ErrNoAnswer = errors.New("no aggregator answered")

// Paths of an aggregator shard's internal API. Every hotspotd that runs the
// aggregator role serves them on its HTTP address (aggregator.Handler), all
// under Prefix.
const (
	// Prefix is the path prefix of every internal route.
	Prefix = "/internal/v1/"

	// PartialsPath takes a POST of one wire partial-count batch (the
	// detectors' flushes), Content-Type application/octet-stream (else
	// 415): 204 when every entry was counted; 400 with
	// {"error": ...} on a bad body, of which nothing was counted; 413 when
	// the body is over the shard's size cap.
	PartialsPath = Prefix + "partials"
	// MembersHeader is set on a shard's answers when its process follows
	// the members: the aggregators that process routes to, each
	// hotset.Escape'd, comma-separated. A sender whose own shard is missing
	// from it knows the others have moved that shard's keys on
	// (docs/aggregator.md).
	MembersHeader = "Hotspot-Members"
	// TopPath answers GET ?app=APP&n=N (n defaults to 10; at most the
	// shard's top-K) with a Top: the shard's busiest keys of app, hot or
	// not. With &rule=R (an index in the app's rule list) it lists only
	// keys that follow rule R: the n busiest (n at most 1000), then every
	// hot key of the rule beyond them; the shards' top-K cut reads these.
	TopPath = Prefix + "top"
	// KeyPath answers GET ?app=APP&key=KEY with the KeyState of one key, or
	// 404 when the shard does not track it (another shard owns it, or it
	// had no recent counts).
	KeyPath = Prefix + "key"
	// EffectsPath answers GET [?app=APP] with an Effects: every key of app
	// (of every app without it) for which the shard holds effect reports
	// over the effect window, with their rates. One query per shard gives
	// the effect of a whole hot set.
	EffectsPath = Prefix + "effects"
	// InstancesPath answers GET [?app=APP] with an Instances: every
	// instance of app (of every app without app) whose effect reports
	// reach the shard and that reported any over the effect window, with
	// its rates summed over its keys.
	InstancesPath = Prefix + "instances"
)

// Count is one key's accesses since the detector's previous flush: what a
// detector's Sink routes to the key's owner.
type Count struct {
	App, Key string
	N        uint64 // accesses since the previous flush, reads and writes
	Writes   uint64 // of N, the writes
	// Bytes is the size of the values of the N accesses, WriteBytes the
	// part of it written; 0 when the events did not say.
	Bytes, WriteBytes uint64
}

// SourceCount is one source of a key's accesses (an app instance, a client)
// and how many of them it made.
type SourceCount struct {
	Src string
	N   uint64
}

// KeySources is what a detector saw of one key's sources over the flush
// rounds since it last sent them (about a second), for a key near the
// threshold: the key's accesses in those rounds (Total, with a source or
// without), the busiest sources (at most 16, busiest first) and a
// serialized HyperLogLog of all the distinct ones (nil: none).
type KeySources struct {
	App, Key string
	Total    uint64
	Top      []SourceCount
	Distinct []byte
}

// Effect is what the apps' caches did with a key's reads: reads answered
// from their L1, reads that went to Redis (L2), loads from the source
// behind it, and reads their per-instance rate limit refused.
type Effect struct {
	L1Hits, L2Reads, SourceLoads, Limited uint64
}

// KeyEffect is the effect the apps reported for one key since the
// detector's previous flush.
type KeyEffect struct {
	App, Key string
	Effect
}

// InstanceEffect is the effect one instance of App reported for all its
// hot keys since the detector's previous flush.
type InstanceEffect struct {
	App, Instance string
	Effect
}

// KeyState is one key's state at the shard that owns it: the JSON of KeyPath
// and of each entry of TopPath.
//
// Sources, DistinctSources, Effect and ServedL1 are kept only for keys near
// their rule's threshold or hot (docs/aggregator.md, "Sources" and
// "Effect"), and are left out otherwise.
type KeyState struct {
	App   string    `json:"app"`
	Key   string    `json:"key"`
	Rate  float64   `json:"rate"`           // per second over the rule's window, in its measure: accesses, or bytes
	Hot   bool      `json:"hot"`            // held hot by the rule (with hysteresis)
	Since time.Time `json:"since,omitzero"` // when it turned hot; zero when cold
	Rule  int       `json:"rule"`           // the app's rule that decides for the key; -1: the default
	Kind  string    `json:"kind,omitempty"` // "count", "bytes" or "write": what the rule counts

	// Sources are the key's busiest sources (at most MaxSources), busiest
	// first, each with its share of the key's accesses over about the
	// rule's window.
	Sources []SourceShare `json:"sources,omitempty"`
	// DistinctSources estimates how many distinct sources sent the key
	// over one to two of the rule's windows (a HyperLogLog).
	DistinctSources uint64 `json:"distinct_sources,omitempty"`
	// Effect is what the apps' caches did with the key's reads, per
	// second cluster-wide over the effect window (10 s); nil when nothing
	// was reported.
	Effect *EffectRates `json:"effect,omitempty"`
	// ServedL1 is Effect's ServedL1; nil when nothing was reported.
	ServedL1 *float64 `json:"served_l1,omitempty"`
}

// MaxSources is how many of a key's sources the answers list.
const MaxSources = 8

// SourceShare is one of a key's sources and its share of the key's
// accesses, a fraction from 0 to 1.
type SourceShare struct {
	Source string  `json:"source"`
	Share  float64 `json:"share"`
}

// EffectRates is an Effect per second.
type EffectRates struct {
	L1Hits      float64 `json:"l1_hits"`      // reads answered from the apps' L1
	L2Reads     float64 `json:"l2_reads"`     // reads that reached Redis
	SourceLoads float64 `json:"source_loads"` // loads from the source behind it
	Limited     float64 `json:"limited"`      // reads the per-instance rate limit refused
}

// ServedL1 is the fraction of the reads answered from the L1: L1Hits /
// (L1Hits + L2Reads + Limited), and false when there were none.
func (r EffectRates) ServedL1() (float64, bool) {
	reads := r.L1Hits + r.L2Reads + r.Limited
	if reads <= 0 {
		return 0, false
	}
	return r.L1Hits / reads, true
}

// KeyEffectRates is one key's entry of Effects.
type KeyEffectRates struct {
	App    string      `json:"app"`
	Key    string      `json:"key"`
	Effect EffectRates `json:"effect"`
}

// InstanceEffectRates is one instance's entry of Instances.
type InstanceEffectRates struct {
	App      string      `json:"app"`
	Instance string      `json:"instance"`
	Effect   EffectRates `json:"effect"`
}

// Instances is the JSON answer of InstancesPath.
type Instances struct {
	Shard     string                `json:"shard"` // the answering shard's id
	Instances []InstanceEffectRates `json:"instances"`
}

// Effects is the JSON answer of EffectsPath.
type Effects struct {
	Shard string           `json:"shard"` // the answering shard's id
	Keys  []KeyEffectRates `json:"keys"`
}

// Top is the JSON answer of TopPath.
type Top struct {
	App   string     `json:"app"`
	Shard string     `json:"shard"` // the answering shard's id
	Keys  []KeyState `json:"keys"`  // busiest first
}

// Flush describes one detector flush round's counts, as the detector's Sink
// carries them to the aggregators.
type Flush struct {
	At time.Time // when the round ended
	// Span and End are the event time the counts happened in: [End-Span,
	// End]. For a live stream that is about one flush interval ending a
	// little before At; when the detector catches up on a backlog (after a
	// rebalance, a pause or an outage) it is the stretch of the past the
	// round read. The aggregator counts the accesses where they happened,
	// so what is older than its window is never counted as recent. A zero
	// End means unknown (no counts, or no event times).
	Span time.Duration
	End  time.Time
	// Reach, when set, is the event time up to which the detector has read
	// every access: one of its partitions that got records round after
	// round has had none for longer than its cadence allows (its leader
	// moved, or its producers' writes wait for the in-sync replicas), so
	// its accesses after Reach are late, not absent. The aggregators'
	// window does not move past it. It is set before End, or without End
	// in a round with no counts (the detector is then waiting, not idle).
	Reach time.Time
	// Step and Weights, when both are set, say how the counts spread over
	// [End-Span, End]: Weights[i] of the round's accesses happened in the
	// i-th Step of event time from the Step boundary at or before End-Span.
	// The aggregator places every key's count in those proportions, not
	// evenly (a backlog holds a few records far apart in time, which other
	// partitions' records between them have been counted already). Step is
	// whole milliseconds.
	Step    time.Duration
	Weights []uint64
	// Seq numbers the detector's rounds, increasing, unique per detector
	// process (it starts at the start time in milliseconds). A retry of a
	// round's counts carries the same Seq, so that an aggregator that
	// applied them once but answered too late does not count them twice.
	Seq uint64
	// Sources and Effects go to each key's owner with its counts, and
	// Instances to an owner of each instance. They are reused after the Sink's
	// Send returns, as the counts are.
	Sources   []KeySources
	Effects   []KeyEffect
	Instances []InstanceEffect
}
