// Package proxy is a Redis proxy with the hotcache SDK inside: any Redis
// client points at it instead of Redis and gets hot keys answered from the
// SDK's L1 within the hot-read limit, every access reported to Hotspot, and
// writes through it invalidating the key in every proxy's and SDK
// instance's L1. It stands in front of one Redis or of a Redis Cluster
// (which its clients see as a cluster of the proxy alone). cmd/hotspot-proxy
// runs it as a sidecar; docs/proxy.md is its manual.
//
// In front of one Redis each client connection has an upstream connection
// of its own (Config.Upstream "dedicated"), or shares a few pipelined ones
// until its connection acquires state, then gets its own ("shared",
// upstream.go).
//
// New checks a Config and starts the SDK Client of the default app; Serve
// serves a listener until its context ends and owns every goroutine the
// proxy starts.
//
// The key invariant: a client gets one reply per reply Redis would have
// sent, in the order of its commands, each Redis' own bytes or, for a read
// answered from L1, bytes Redis would have sent; a read is answered from L1
// only once Redis has answered every command before it on the connection
// that may change the connection's state or write, so it sees them.
package proxy
