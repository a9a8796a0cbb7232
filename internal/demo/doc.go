// Package demo is hotspot demo: it starts a small cluster on the local
// stack (two hotspotd and two itemapp processes, supervised as children),
// drives Zipf traffic and a flash crowd through the apps, prints a live
// table of hot keys and load every second, and a summary with each flash
// key's detection delay and the share of its reads served from memory.
//
// Invariant: every run has a root, topic, group and Redis prefix of its own,
// and every process it starts is stopped before Run returns.
package demo
