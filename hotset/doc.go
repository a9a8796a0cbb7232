// Package hotset is Hotspot's ZooKeeper contract: the layout and encoding of
// the membership of both server roles and of the published hot set, between
// the processes that write them (hotspotd's detectors and aggregators,
// operators through its admin API) and those that read them (the aggregator
// ring, the apps' hotcache, the tools). It also holds the defaults all of
// them share: the ZooKeeper root, the access-event topic and the detectors'
// consumer group.
//
// Layout under a root (default "/hotspot"):
//
//	<root>/members/aggregators/<id>   ephemeral; an aggregator shard (Member, JSON)
//	<root>/members/detectors/<id>     ephemeral; a detector (Member, JSON)
//	<root>/hot/<app>/<shard>          persistent; the keys shard <shard> holds hot for <app> (Shard, JSON)
//	<root>/parts/<app>/<shard>/<i>    persistent; the shard's keys with PartOf(key) == i (Part, JSON; parts.go)
//	<root>/parts/<app>/<shard>/lease  persistent; the parts' lease and every key's rate (Lease, JSON)
//	<root>/hot/<app>/%pins            persistent; keys an operator pinned hot (Shard, Source "pinned")
//	<root>/hot/<app>/%blocks          persistent; keys an operator blocked from ever being hot (Shard)
//	<root>/rules/<app>                persistent; the app's rule list (package rules, EncodeNode)
//
// App names and shard ids are path-escaped, so any string is a valid name.
//
// Invariant: a Shard node is written only by the aggregator named in it and
// carries a TTL. A reader treats its keys as hot until TTL has passed since it
// last saw the node change, so a dead aggregator's keys age out within one TTL
// instead of vanishing at once, and a live one renews the node well within TTL.
// Each change to one shard costs a watcher one read: of the whole Shard
// node, or, for a reader that follows the shard's parts, of the one part or
// the lease that changed. The Shard node is written with every write, so
// readers that know nothing of the parts keep working unchanged.
package hotset
