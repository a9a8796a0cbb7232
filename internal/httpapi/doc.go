// Package httpapi serves hotspotd's public HTTP API (docs/api.md): the
// cluster's hot keys, one key's state, the busiest keys, operator pins and
// blocks, metrics and health. Its answers and bodies are the types of
// package hotspotapi, the API's contract, and TestWireFormat pins their
// bytes.
//
// Invariant: any hotspotd answers for the whole cluster. The hot set comes
// from the hot set published in ZooKeeper (a hotwatch Snapshot, the same view
// every app has); current rates and the busiest keys come from asking every
// aggregator member over its internal API (Config.Aggregators, a
// shardclient.Client), so no answer depends on which process was asked.
package httpapi
