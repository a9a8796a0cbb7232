// Package shardclient is the one client of the aggregator shards' internal
// API (package shardapi): every hotspotd routes its detector's counts and
// asks for the shards' answers through it.
//
// Client.Send is the detectors' Sink: it routes each flush's partial counts
// to the shards that own them and POSTs one wire partial-count batch per
// shard, in parallel, over persistent connections. Client.Top, Client.Key
// and Client.Effects ask every shard, for hotspotd's public API. The ring follows the
// aggregators' membership in ZooKeeper (Follow, package hotset's layout).
//
// The owner of (app, key) is the node the router ring maps the ring key
//
//	app + "\x00" + key
//
// to, over the aggregators registered under hotset.AggregatorsDir(root). Every
// Hotspot process builds the same ring from the same members, so all
// detectors send a key's counts to the same shard. The NUL separator keeps
// ("a", "b:c") and ("a\x00b", "c")-style pairs apart as long as app names
// contain no NUL.
//
// An aggregator that fails (a crashed process stays in the ring until its
// ZooKeeper session expires) is routed around: its counts go to each key's
// next node on the ring, which is the node that owns the key once the dead
// member has left, and the failed node is skipped for SuspectFor. So one dead
// shard neither stalls the other shards' counts nor loses its own.
//
// Invariant: Send returns nil only when every count was accepted by some
// aggregator (2xx); otherwise its error names each owner that failed, and the
// detector retries the whole flush without committing (an owner that did
// accept may count it twice: at-least-once, never a silent loss). One Send
// routes all its counts with one ring, so a membership change never splits a
// flush between two views.
package shardclient
