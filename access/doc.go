// Package access holds the access-event types of Hotspot's public
// contract: what one access event says once decoded (Entry, Op) and the
// defaults the formats share (DefaultApp, DefaultMaxKeyLen). The byte
// formats producers write to Kafka are documented in docs/wire.md; their
// codecs live in internal/wire, whose Entry and Op are these.
//
// A custom detector input names these types: a detector.Decoder turns one
// record into Entry values, so it can be written outside this module.
//
// Invariant: every Entry a decoder hands on has an App of 1..MaxKeyLen
// bytes (DefaultApp when the event names none), a Key of 1..MaxKeyLen bytes
// and a Count >= 1. The package imports only the standard library.
package access
