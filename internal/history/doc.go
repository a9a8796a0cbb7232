// Package history keeps every promotion and demotion that aggregator shards
// decide in a Redis Stream per app, and reads it back newest first.
//
// The shard that decides an event hands it to Store.Record, which only queues
// it (bounded; a full queue drops and counts), so Redis never slows
// detection. Store.Run appends queued events with XADD, trimming each stream
// to about MaxLen entries and, at most once a second per stream, to
// Retention (XTRIM MINID ~), and to an index stream per key (the key's last
// MaxPerKey events, expiring after Retention), so that a query for one key
// reads only that key's events. Because the streams live in Redis, history
// survives restarts of every hotspotd and any process can read it.
//
// Invariant: an event is either stored within MaxDelay of its decision or
// dropped and counted (hotspot_history_events_dropped_total), never stored
// later; so an entry's ID (Redis's clock when it was stored) lies within
// MaxDelay plus clock skew of its "at", which is what lets Query select by
// "at" through an ID range. Within one stream, entries are in the order they
// were stored. See docs/history.md.
package history
