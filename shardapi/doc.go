// Package shardapi is the aggregator shards' contract with the rest of
// Hotspot: the paths of their internal HTTP API, the JSON of its answers
// (KeyState, Top, Effects, Instances), the partial counts a detector hands
// on each flush (Count, Flush and what rides with them) and ErrNoAnswer.
//
// A detector's Sink takes Flush and Count (package detector names them), an
// aggregator serves the paths (aggregator.Handler), and the routing client
// that POSTs counts to each key's owner and asks every shard lives in
// internal/shardclient. The partial-count batch's bytes are documented in
// docs/wire.md, the routes in docs/aggregator.md.
//
// Invariant: the package holds types, constants and one sentinel error, no
// behaviour beyond EffectRates.ServedL1; it imports only the standard
// library, so any process, in this module or not, can speak the contract.
package shardapi
