// Package ingest reads access logs that operators already ship to Kafka,
// mapped by an input file, into hotspotd's accesses (wire.Entry). An input
// names a topic and the format of its records: hotspot (the wire format of
// package wire), json (JSON objects whose dotted paths give key, app, time,
// bytes, op and count), regex (lines matched by an RE2 pattern with named
// groups) or combined (nginx's and Apache's combined access log). A key
// template builds each access's key from the fields of a line; where clauses
// filter lines and an extract pattern pulls parts out of a field; a field
// may give the access's source (who made it: Entry.Src). The file's
// contract is docs/ingest.md.
//
// Parse validates a file whole and compiles it; each Input gives a Decoder
// per goroutine. The package is a library: it knows nothing of Kafka.
//
// Invariants:
//   - Decoding never panics, whatever the record.
//   - For every format but hotspot, each non-blank line of a record yields
//     exactly one access or exactly one call of onInvalid with its Reason;
//     a record with no non-blank line yields one call, with ReasonEmpty.
//     (Format hotspot counts as package wire does: a binary batch is
//     delivered whole or rejected once.)
//   - Every access has a key of 1..maxKeyLen bytes and an app of
//     1..maxKeyLen bytes, both valid UTF-8, and a count >= 1. Keys and apps
//     are never truncated or repaired: such lines are dropped with a reason.
//   - A source never drops a line (formats but hotspot): an access's Src is
//     empty (no source) or 1..maxKeyLen bytes of valid UTF-8, never
//     truncated or repaired; a source that is not is left out and the
//     access kept.
//   - Decoding a combined or json line allocates nothing once the Decoder's
//     scratch buffers have grown, filtered lines included; a record with a
//     line dropped for another reason costs the *Error Decode returns. Go's
//     regexp allocates its submatch slice: one allocation per line for
//     format regex and for an extract pattern.
package ingest
