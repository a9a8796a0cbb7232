// Package aggregator merges the partial counts that detectors send for the
// (app, key) pairs this shard owns on the ring, decides which keys are hot and
// publishes this shard's hot set to ZooKeeper through a Publisher.
//
// Each key is judged by its app's rule for it (SetRules; package rules),
// else by the default rule from Config: reads over Window, hot at Threshold.
// It has a sliding window of its rule's length in 100 ms buckets that
// counts what the rule measures (accesses or bytes, of reads, writes or
// both). Under a threshold rule a key turns hot as soon as its window rate
// reaches the threshold and turns cold only after its rate has stayed below
// the low mark for the hold, so a key at the threshold does not flap; a
// never rule's keys are counted but never hot; a top-K rule's K busiest
// keys over all shards are hot, cut with hysteresis at the K-th place. A
// top-K view per app lists the busiest keys even when cold. A key near its
// threshold, or hot, also keeps who sends it (its busiest sources and their
// shares, an estimate of its distinct sources) and what the apps' caches
// did with its reads (the effect they report); other keys keep neither.
//
// Invariants: every tracked key is judged by a rule of its app's current
// rules once SetRules has returned; memory is bounded by MaxKeys tracked keys
// taking at most MaxBytes of heap, as keybytes.go accounts them (the coldest
// are evicted; a hot key is never evicted to make room), and by MaxNearKeys keys
// with sources and effect, each with at most 32 sources and two sketches of
// 4 KiB; each app's shard node is
// written at most once per PublishInterval and renewed every Renew (< TTL)
// while it holds keys, so readers never see a live shard's keys expire; a
// shard node of an aggregator that is no longer a member is deleted only
// after its Updated is older than 2*TTL, when every reader has already
// expired its keys. See docs/aggregator.md.
package aggregator
