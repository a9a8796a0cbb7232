// Package httpsource reads values from an app's source of truth over HTTP:
// a hotcache.Loader for an app whose source of truth is an HTTP service
// (hotspot warm uses it to fill an app's Redis before traffic is opened).
//
// Invariant: a 200 answer's body is the value, a 404 is
// hotcache.ErrNotFound (the key does not exist), anything else an error.
package httpsource
