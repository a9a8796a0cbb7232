// Package aggregator merges the partial counts that detectors send for the
// (app, key) pairs this shard owns on the ring, decides which keys are hot and
// publishes this shard's hot set to ZooKeeper through a Publisher.
//
// Each key has a sliding window (default 1 s in 100 ms buckets, aligned to
// this process's clock at receipt). A key turns hot as soon as its window
// rate reaches Threshold and turns cold only after its rate has stayed below
// LowMark for Hold, so a key at the threshold does not flap. A top-K view per
// app lists the busiest keys even below the threshold.
//
// Invariants: memory is bounded by MaxKeys tracked keys (the coldest are
// evicted; a hot key is never evicted to make room); each app's shard node is
// written at most once per PublishInterval and renewed every Renew (< TTL)
// while it holds keys, so readers never see a live shard's keys expire; a
// shard node of an aggregator that is no longer a member is deleted only
// after its Updated is older than 2*TTL, when every reader has already
// expired its keys. See docs/aggregator.md.
package aggregator
