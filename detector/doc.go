// Package detector counts access events from a Source (in hotspotd, the
// Kafka access topics through internal/kafkaio) and hands per-key partial
// counts to a Sink every flush tick. It imports no Kafka client: the
// types a Source hands it are package access's.
//
// A Detector is one member of a consumer group. Each partition it is
// assigned is read and counted by one goroutine that owns that partition's
// windowed counter, so counting takes no lock. A flusher goroutine ends a
// round every flush tick: every partition goroutine hands over the counts it
// accumulated since the previous round, the flusher merges them, gives them
// to the Sink, and only then commits the partitions' offsets. A round also
// ends early, at most once per tick, when a key turns hot in it; its
// offsets are committed with the next tick's round, so commits stay at one
// per tick.
//
// Invariants:
//   - An offset is committed only after the Sink accepted every count carried
//     by the records before it (at-least-once: a replay may over-count, a
//     commit never skips counts that were not handed on).
//   - Memory is bounded whatever the number of distinct keys: at most
//     Config.MaxKeys keys and Config.MaxKeyBytes key bytes are tracked (see
//     docs/detector.md for the bound in bytes).
//   - The local filter loses, for any key, fewer than
//     Alpha*Threshold*Window/D accesses per detector in any interval of
//     length Window; D detectors together under-count a key's rate by less
//     than Alpha*Threshold. For an app with rules (SetRules), a key under a
//     threshold rule of threshold T is under-counted by less than Alpha*T,
//     in accesses or, for a bytes rule, in bytes per second; an app with a
//     topk rule loses nothing. A key's writes and bytes are forwarded or
//     dropped with the accesses they came with.
//   - A record that does not decode is counted by reason and skipped; it never
//     stalls its partition.
package detector
