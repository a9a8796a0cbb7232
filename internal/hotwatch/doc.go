// Package hotwatch follows the hot set that the aggregators publish in
// ZooKeeper (layout and encoding in package hotset) for one app or for every
// app, and keeps an immutable Snapshot of app -> key -> hotset.Key that any
// number of goroutines read without locks.
//
// Invariants:
//   - A shard's keys count until the shard's TTL has passed since this process
//     last saw the shard node change (local receive time, so clock skew between
//     hosts does not matter). A node read for the first time whose Updated is
//     already older than its TTL by the local clock is ignored until it changes.
//     A timer drops expired shards, so a dead aggregator's keys age out within
//     one TTL, not at once and not never.
//   - While the ZooKeeper connection is down nothing expires (no aggregator
//     can renew either), for at most Config.MaxStale (5 minutes); after a
//     reconnect every TTL runs from the reconnect. An outage never empties
//     the view at once. A freeze of this process is told apart (its loop
//     did not run for a second): then the TTLs apply at once, and Snapshot
//     waits for that before it answers.
//   - A key hot in several shards is merged: the highest rate, the earliest
//     since, "pinned" if any shard pins it, and one reason: the rule and kind
//     of the strongest kind (write, then bytes, then count; on a tie the
//     lowest rule index), so a key any shard calls a write key is one.
//     Each key keeps the Rule and Kind its shard node published; a change of
//     either is a Change (Changed), as appearing and disappearing are.
//   - Readers do not block: Snapshot is an atomic load (except, briefly,
//     right after a freeze of the process, see above). All state is owned by
//     the goroutine running Run; OnChange is called from it, in order, after
//     the new Snapshot is published.
//   - A shard whose part folder holds a valid lease and every part it names
//     is followed through them (a change of keys reads one part, a rate
//     refresh or a renewal the lease, whose rates, to three digits, replace
//     those of the parts it is for); its shard node is then listed, not read. Any other shard is
//     read from its shard node. Moving between the two keeps the shard's
//     keys in place: the one left counts until the other has been read.
//   - Watches fire once; the ZooKeeper layer (internal/zkgroup) re-arms them
//     after every event and after a reconnect, and re-reads everything after a
//     session expiry, so the Snapshot converges to what ZooKeeper holds.
package hotwatch
