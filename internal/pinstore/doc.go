// Package pinstore keeps the operators' pins and blocks in ZooKeeper: per
// app, one node of keys pinned hot and one of keys blocked from ever being
// hot (package hotset: PinsNode, BlocksNode). Every reader of the hot set
// (internal/hotwatch, hence the SDK and hotspotd's API) merges them in.
//
// Invariant: changes are read-modify-write with ZooKeeper's version check,
// retried on a conflict, so two operators editing the same app at once never
// lose each other's change; an emptied node is deleted.
package pinstore
