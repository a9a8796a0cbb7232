// Package wire encodes and decodes Hotspot's wire formats: the access events
// that producers write to Kafka (a JSON object, newline-separated JSON objects,
// or the SDK's binary batch) and the partial-count batch a detector POSTs to an
// aggregator. The byte layouts are documented in docs/wire.md.
//
// Invariants:
//   - Decoding never panics, whatever the input, and never allocates in
//     proportion to a length or count read from the input.
//   - Every Entry handed to a callback has a key of 1..MaxKeyLen bytes, an app
//     of 1..MaxKeyLen bytes (or "default" when the record names none) and a
//     count >= 1. Keys that are too long are rejected, never truncated.
//   - A binary batch (access or partial) is validated whole before the first
//     entry is delivered: it is delivered completely or not at all. In
//     newline-separated JSON each line stands alone.
//   - Decoding a binary batch allocates nothing per entry; decoding a JSON
//     object allocates nothing once the Decoder's scratch buffers have grown.
//
// The decoded access (Entry, Op) is package access's, the public contract's
// type, aliased here. The package imports only the standard library and
// package access.
package wire
