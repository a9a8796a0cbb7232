// Package rules is Hotspot's rule model: which keys of an app are hot, by
// what measure, over which window. An app has an ordered list of rules; the
// first rule whose pattern matches a key decides for it, and keys no rule
// matches follow the app's default rule (hotspotd's flags).
//
// A List is what operators write (HTTP, CLI, ZooKeeper): each Rule names only
// what differs from the default, and a zero field is absent. Decode checks a
// whole list and refuses it at its first bad rule with an *Error naming the
// rule's index. Compile resolves a checked List against the default into a
// Set, whose Match gives the Effective rule of a key.
//
// Invariant: a Set only ever holds rules that passed Check, so every
// Effective has a window of whole 100 ms buckets between 100 ms and 60 s, a
// finite positive threshold, a low mark in (0, 1] and, in top-K mode, a k in
// 1..1000.
package rules
