// Package access is the public contract of what a detector consumes: the
// access events, once decoded (Entry, Op, and the defaults the formats share,
// DefaultApp and DefaultMaxKeyLen), and the records they arrive in, as a
// detector's Source hands them over (a Generation of partition Claims, each
// yielding Records; ErrRewound). The byte formats producers write are
// documented in docs/wire.md; their codecs live in internal/wire, whose
// Entry and Op are these.
//
// Package detector declares Source and Decoder and names these types
// through aliases, so a source (internal/kafkaio's, or one outside this
// module) and an input's decoder implement them without importing the
// detector.
//
// Invariant: every Entry a decoder hands on has an App of 1..MaxKeyLen
// bytes (DefaultApp when the event names none), a Key of 1..MaxKeyLen bytes
// and a Count >= 1. The package imports only the standard library.
package access
