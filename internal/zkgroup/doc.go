// Package zkgroup is Hotspot's ZooKeeper plumbing shared by the aggregator,
// the detector, the hotcache SDK and the CLI: one Session per process, group
// membership (Session.Join, Session.Watch) and the node operations of the
// adapters built on it (Session.Get, Children, Set, Create, Put, Delete), each
// bounded by its context.
//
// Invariant: what the callers see converges to what ZooKeeper holds, however
// the connection behaves. ZooKeeper watches fire once and the client drops
// them when the session expires, so every loop here re-arms its watch after
// each event, after a reconnect and after a session expiry, re-reads what the
// watch covered, and retries failed calls with backoff; Join re-creates its
// ephemeral node in the new session that go-zookeeper opens after an expiry.
// Session state comes from go-zookeeper's event callback, never from its
// lossy event channel.
package zkgroup
