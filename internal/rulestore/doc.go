// Package rulestore keeps the apps' rule lists (package rules) in
// ZooKeeper, one node per app at hotset.RulesPath, and watches them.
//
// Store reads and writes one app's list with compare-and-set: a write names
// the version it replaces (0: none stored) and fails with ErrConflict when
// another writer got in first, so two operators never silently overwrite
// each other. A list's version is its node's ZooKeeper version + 1.
//
// Watcher keeps every app's current rules compiled against the default rule
// and reports each change to a callback.
//
// Invariant: the Watcher converges to what ZooKeeper holds (its watches are
// re-armed after every event, reconnect and session expiry), and an app
// whose node cannot be decoded keeps its last good rules; a deleted node
// falls back to the default rule.
package rulestore
