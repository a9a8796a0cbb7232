// Package hotspotapi is the contract of hotspotd's public HTTP API, /v1
// (docs/api.md): its paths and limits, the JSON of its answers and bodies,
// and Client, the one typed client Go programs call it with (the hotspot
// command, hotcache's TopKeys).
//
// Invariant: hotspotd's server (internal/httpapi, internal/history)
// encodes these same types, so what a Client decodes is what the server
// meant, and a change of the wire format is a change of this package. It
// imports only the standard library and the other contract packages.
package hotspotapi
