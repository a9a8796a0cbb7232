// Package score grades a detection run against the load generator's ground
// truth: detection delay from each key's true threshold crossing to its
// publication, and precision and recall of the published hot set.
//
// Invariant: a key counts as must-report when its true rate over the
// window ever reached High*threshold (default 1.2x), and as must-not when it
// never exceeded Low*threshold (default 0.8x); keys in between are a grey zone
// that is neither rewarded nor punished, as the rule's hysteresis allows
// (docs/design.md, "What hot means").
package score
