// Package webhook delivers the promotions and demotions an aggregator shard
// decides to per-app HTTP subscriptions, and keeps those subscriptions in
// ZooKeeper (<root>/webhooks/<app>, see Store).
//
// A Dispatcher is the shard's Recorder for webhooks: Record only queues each
// event on every matching subscription's own bounded queue and never blocks;
// a full queue drops the event and counts it. One goroutine per subscription
// POSTs its queue in order, signing each body with HMAC-SHA256 when the
// subscription has a secret, and retries a failed delivery with exponential
// backoff up to MaxAttempts.
//
// Invariant: a slow or dead receiver delays only its own queue, never the
// shard nor other receivers, and every event it does not get is counted in
// hotspot_webhook_undelivered_total. Since only the shard that owns a key
// decides its promotions and demotions, each event is delivered once per
// subscription in normal operation (at least once: a retry after a lost
// answer repeats it, with the same X-Hotspot-Delivery id). See
// docs/history.md.
package webhook
