// Package loadgen generates synthetic access workloads for Hotspot and
// records their ground truth, for `hotspot load`, `hotspot bench`, the demo
// and tests.
//
// A workload is a Zipf-distributed background over many keys plus planted
// keys (flash crowds that ramp up to a target rate, or keys at fixed rates),
// written to Kafka in one of the record forms the detector reads: its own
// (one JSON object per record, newline-separated JSON, or the SDK's binary
// batch), or an access log it reads through an input file (package ingest):
// combined log lines or a service's JSON objects, whose input file
// InputFile gives (forms.go). With Config.Sources, every access names the
// app instance that made it (sources.go). Records are never keyed by cache
// key, so they spread over all partitions.
//
// Invariants:
//   - Pacing is exact: by the end of tick i, the run has produced
//     floor(integral of the target rate over [0, (i+1)*Tick]) events of each
//     source, so fractional remainders carry over and nothing drifts.
//   - The Truth holds exactly the events handed to the Sink, per key and per
//     100 ms slot, for every planted key and every background key whose
//     expected rate is at least TrackFraction of the threshold; with
//     sources, also the planted keys' events per source over the run.
//   - The events are deterministic given the Config (including Seed): the
//     same keys in the same ticks (only the order of entries inside a binary
//     batch varies), with or without sources (the instances are drawn by a
//     generator of their own). Only Run reads the clock.
//   - Every record of combined and mapped-json, decoded with InputFile's
//     input file (Config.InputFile's, with sources), yields exactly the
//     generator's accesses: (app, key), count 1, op read, the time of its
//     tick and its instance (TestInputFileDecodes).
//
// The Truth file format and the flash-crowd syntax are documented in
// docs/loadgen.md.
package loadgen
