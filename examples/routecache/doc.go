// Package routecache is a worked example of hotcache: a shop-to-shard routing
// cache, the system behind Hotspot's seed 002. Every order of a shop must
// find the database shards that hold the shop's orders; the answer, a shard
// bitmap per shop, is read on every request, changes rarely, and a popular
// shop's key is read tens of thousands of times a second during a sale.
//
// Values are versioned shard bitmaps (v1: 16 shards in two bytes; v2: any
// number); readers accept both and upgrade v1 in memory, writers write v2.
// Routes live in Redis for 5 minutes; unknown shops are answered by a Bloom
// filter of known shops and a 30 s null cache; while Redis fails, a route read
// in the last 10 s is served; the source of truth is read at most 2000 times
// a second per instance. An order written to a new shard ORs the shard into
// the shop's bitmap (idempotently) and invalidates the route everywhere. A
// migration drops every route (InvalidatePrefix) and warms them again at a
// bounded rate.
//
// Invariant: shards are only ever added to a shop's route, except by a
// migration; once OnOrderWrite returns nil, every instance's Route includes
// the shard as soon as the invalidation broadcast reaches it (about a
// millisecond), and the instance that wrote includes it at once.
//
// README.md walks through it.
package routecache
