// Package hotcache is the SDK that applications embed to read through
// Hotspot: it serves the app's hot keys from local memory (L1), other keys
// from Redis (L2) and the app's source of truth (a Loader), reports every
// access (reads with the bytes they served, and writes) to Hotspot through
// Kafka, and follows the hot set that Hotspot
// publishes in ZooKeeper. Its reports name the instance that sends them
// (WithInstanceID), and every few seconds they say, per hot key, how many
// of its reads L1 answered and how many went to Redis, to the source or were
// refused by a rate limit: the key's effect, whether promoting it helped.
//
//	c, err := hotcache.New(ctx,
//		hotcache.WithApp("shop"),
//		hotcache.WithZooKeeper([]string{"zk:2181"}, ""),
//		hotcache.WithRedis("redis:6379"),
//		hotcache.WithKafka([]string{"kafka:9092"}, ""),
//		hotcache.WithLoader(db))
//	...
//	v, err := c.Get(ctx, "item:42")
//
// Invariants:
//   - A promoted key is served from L1 for as long as it is hot: promoted
//     values live in a table of their own beside the ristretto cache, so no
//     admission policy or eviction can drop them (within the L1 byte budget;
//     a promotion over budget is refused, counted and logged). A demoted key
//     leaves L1 at once. A key published with kind "write" never enters L1,
//     and leaves it at once when its kind turns to write: a write-hot key's
//     reads and writes must reach its source.
//   - A Get of a hot key with a value in L1 does not allocate, lock or wait;
//     counting the access and its bytes for Hotspot is two atomic adds,
//     which also yield the key's L1 hits for its effect report.
//     Every Get reports the size of the value it served, every Set and
//     Delete a write. No Get ever waits for
//     Kafka or ZooKeeper.
//   - Backend reads are bounded per instance: one read per key at a time
//     (single flight), hot-key reads by a token bucket (default 400/s),
//     Loader calls by another (default 2000/s) that Warm shares with live
//     misses, and a cold key this instance reads more than 400 times in a
//     second is kept locally for 1 s. Past a bucket a Get serves a stale L1
//     value if it has one, else the WithFallback answer, else fails at once
//     with ErrThrottled.
//   - While Redis fails, hot keys are still served and cold keys fail fast
//     (ErrUnavailable) or are served from values read in the last 10 s; a
//     Redis outage never turns into a stampede on the Loader.
//   - Set, Delete, Invalidate and InvalidatePrefix invalidate in Redis and
//     in every instance's L1 within the broadcast latency; an invalidation
//     that cannot land is retried every 100 ms from a bounded queue, and
//     until it lands the instance that made it reads the key from the Loader
//     only. No instance reinstates a value older than a write it has seen.
//     See Set for the bound.
//   - With several Redis addresses, a hot key's value lives on its first R
//     ring nodes (WithRedisReplicas, default 3), every one of which Set and
//     Delete invalidate, and each read picks one of them with router.Picker;
//     a cold key lives on its owner alone.
//
// docs/hotcache.md gives the design, the bounds and the defaults.
package hotcache
