// Package router maps keys to nodes by consistent hashing: every key-to-node
// choice in Hotspot (detector to aggregator shard, application to Redis node)
// goes through a Ring.
//
// Invariant: a key's owner depends only on the key and on the nodes' IDs and
// weights. The hash (XXH64, seed 0) and the virtual-node placement are fixed
// and use no per-process seed, so different processes, and different releases,
// agree on every key's owner. Adding or removing one node moves only the keys
// that the node gains or loses, about 1/N of them.
//
// A Ring is immutable; a Table swaps rings atomically as membership changes,
// so lookups never lock. A Picker chooses among a key's first few nodes by
// their recent hit ratio, load, latency and staleness, skipping unhealthy
// ones (hotcache reads hot keys' Redis replicas through one).
// ConsistentHash plugs a Ring into go-redis's Ring client.
//
// The package does no I/O and imports only the standard library.
package router
