// Package zkpublish implements aggregator.Publisher on ZooKeeper, with the
// layout and encoding of package hotset:
//
//	<root>/hot/<app>/<shard>          persistent; written by Publish, deleted by Remove and Collect
//	<root>/parts/<app>/<shard>/...    persistent; the lease and part nodes (hotset.Lease): Publish writes
//	                                  the parts that changed, or the lease alone; Remove and Collect delete them
//	<root>/members/aggregators/<id>   ephemeral; held by Join (zkgroup.Session.Join), names escaped with hotset.Escape
//
// Invariant: Collect deletes a shard node only if its shard is not a member,
// the node is older than the caller's bound and twice the node's own TTL by
// both its Updated field and ZooKeeper's mtime, and it has not changed since
// it was read (versioned delete). Every reader has then expired its keys, so a
// collection never removes a key that a reader still serves. A shard's part
// folder goes by the same rule, judged by its lease, which is deleted first.
//
// Publish remembers the parts and the lease it wrote (in memory: after a
// restart, its first Publish rewrites them all), rewrites a part only when its
// keys changed and the lease when rates moved, and writes the lease after
// every part of a new folder, so a lease always has its parts.
package zkpublish
