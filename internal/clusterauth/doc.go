// Package clusterauth proves that an HTTP request between hotspotd processes
// comes from a holder of the cluster secret.
//
// A Signer adds four headers to each request it sends (through the
// http.RoundTripper that Transport returns): the sender's id, the time, a
// sequence number and an HMAC-SHA256 over the method, the path with its
// query, the SHA-256 of the body, the time, the id and the sequence. A
// Verifier (an http.Handler middleware, Wrap) recomputes the HMAC and
// compares it in constant time, refuses a time outside MaxSkew of its own
// clock, and refuses a (sender, sequence) pair it has already accepted.
//
// Invariant: Wrap's handler is reached only by requests whose signature is
// valid, whose time is within MaxSkew and whose (sender, sequence) has not
// been seen before; every other request gets 401 and its body is not
// passed on. Sequence numbers start at the Signer's creation time in
// nanoseconds, so a restarted sender keeps moving forward.
//
// The package imports only the standard library and client_golang.
package clusterauth
